"""Canary for the private names of Textual that Habakkuk reaches into.

habakkuk/widgets/markdown_stream/textual_private.py uses names Textual does not
promise to keep, so pyproject.toml pins Textual exactly. When Textual is upgraded
(the pin changed), these tests say loudly which name moved and which function of
textual_private.py uses it. This is the one test that looks at Textual's private
names on purpose; it imports them by name, as the module under guard does.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import re
import tomllib
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import textual
from markdown_it import MarkdownIt
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingsMap
from textual.content import Content
from textual.layout import WidgetPlacement
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Markdown, TextArea
from textual.widgets.markdown import MarkdownFence

from habakkuk.widgets.markdown_stream import textual_private

REPO = Path(__file__).resolve().parents[2]
GUARDED = "habakkuk/widgets/markdown_stream/textual_private.py"

DOCUMENT = """\
A paragraph.

- an item
- another

```python
x = 1
```
"""


def pinned_textual() -> str:
    """The exact version of Textual that pyproject.toml asks for."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    pins = [
        str(requirement).split("==", 1)[1].strip()
        for requirement in project["project"]["dependencies"]
        if re.match(r"textual\s*==", requirement)
    ]
    assert pins, "pyproject.toml must pin textual exactly (textual==X.Y.Z): see " + GUARDED
    return pins[0]


def test_the_installed_textual_is_the_pinned_one() -> None:
    pinned = pinned_textual()
    installed = version("textual")
    assert installed == pinned, (
        f"textual {installed} is installed but pyproject.toml pins {pinned}: "
        f"reinstall, or upgrade the pin together with {GUARDED} and this canary"
    )


class Document(App[None]):
    def compose(self) -> ComposeResult:
        yield Markdown(DOCUMENT)


def _compositor_draws_a_widget(app: App[Any], markdown: Markdown) -> None:
    compositor_module = importlib.import_module("textual._compositor")
    compositor = compositor_module.Compositor()
    compositor.reflow(markdown, markdown.size)
    strips = compositor.render_strips(markdown.size)
    assert any("A paragraph." in strip.text for strip in strips)


def _arrangement_cache_clears(app: App[Any], markdown: Markdown) -> None:
    clear = inspect.getattr_static(Widget, "_clear_arrangement_cache")
    assert callable(clear)
    assert not inspect.signature(clear).parameters.keys() - {"self"}
    markdown._clear_arrangement_cache()


def _placements_replace_region_and_margin(app: App[Any], markdown: Markdown) -> None:
    assert {"region", "margin"} <= set(WidgetPlacement._fields)
    arranged = markdown.arrange(markdown.size)
    first = arranged.placements[0]
    moved = first._replace(region=first.region.translate((0, 1)), margin=first.margin)
    assert moved.region.y == first.region.y + 1 and moved.widget is first.widget


def _markdown_parses_blocks(app: App[Any], markdown: Markdown) -> None:
    blocks = list(markdown._parse_markdown(MarkdownIt("gfm-like").parse(DOCUMENT)))
    assert [type(b).__name__ for b in blocks] == [
        "MarkdownParagraph",
        "MarkdownBulletList",
        "MarkdownFence",
    ]
    paragraph, bullets, fence = blocks
    assert isinstance(paragraph._content, Content) and "A paragraph." in paragraph._content.plain
    assert isinstance(bullets._blocks, list) and bullets._blocks
    assert isinstance(fence, MarkdownFence) and isinstance(fence._highlighted_code, Content)
    assert callable(paragraph._copy_context)
    paragraph._copy_context(blocks[0])


def _markdown_keeps_its_source(app: App[Any], markdown: Markdown) -> None:
    assert markdown._markdown == DOCUMENT
    markdown._markdown = "changed"
    assert markdown.source == "changed"
    markdown._markdown = DOCUMENT


def _screen_update_timer_skips(app: App[Any], markdown: Markdown) -> None:
    assert isinstance(inspect.getattr_static(Screen, "_update_timer"), property)
    timer = app.screen._update_timer
    assert isinstance(timer, Timer)
    assert isinstance(timer._skip, bool)
    assert "self._skip" in inspect.getsource(Timer._run)


def _anchor_release_is_noted(app: App[Any], markdown: Markdown) -> None:
    assert isinstance(markdown._anchor_released, bool)
    assert "_anchor_released" in inspect.getsource(Widget.release_anchor)


def _nodes_keep_their_own_bindings(app: App[Any], markdown: Markdown) -> None:
    class Bound(TextArea):
        BINDINGS = [Binding("ctrl+j", "newline", "Newline")]

    bindings = Bound()._bindings
    assert isinstance(bindings, BindingsMap)
    assert [b.action for b in bindings.key_to_bindings["ctrl+j"]] == ["newline"]
    # Inherited from TextArea: the composer runs these at once too.
    assert "cursor_up" in [b.action for b in bindings.key_to_bindings["up"]]


# (the private name, where it is used, a check that it is
# still there and does what that function relies on)
PRIVATE_NAMES: list[tuple[str, str, Callable[[App[Any], Markdown], None]]] = [
    (
        "textual._compositor.Compositor (reflow, render_strips)",
        f"{GUARDED}: draw_widget",
        _compositor_draws_a_widget,
    ),
    (
        "Widget._clear_arrangement_cache",
        f"{GUARDED}: forget_arrangement",
        _arrangement_cache_clears,
    ),
    (
        "WidgetPlacement._replace, .region, .margin",
        f"{GUARDED}: replace_placement",
        _placements_replace_region_and_margin,
    ),
    (
        "Markdown._parse_markdown, MarkdownBlock._content/_blocks/_copy_context, "
        "MarkdownFence._highlighted_code",
        f"{GUARDED}: parse_blocks, holds_blocks, show_block_as",
        _markdown_parses_blocks,
    ),
    (
        "Markdown._markdown (what Markdown.source reads)",
        f"{GUARDED}: set_document_source",
        _markdown_keeps_its_source,
    ),
    (
        "Screen._update_timer, Timer._skip",
        f"{GUARDED}: draw_updates_promptly",
        _screen_update_timer_skips,
    ),
    (
        "Widget._anchor_released",
        f"{GUARDED}: anchor_released",
        _anchor_release_is_noted,
    ),
    (
        "DOMNode._bindings (a BindingsMap, with inherited BINDINGS)",
        f"{GUARDED}: own_bindings",
        _nodes_keep_their_own_bindings,
    ),
]


async def test_every_private_name_of_textual_we_use_is_still_there() -> None:
    moved: list[str] = []
    app = Document()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        markdown = app.query_one(Markdown)
        for name, user, check in PRIVATE_NAMES:
            try:
                check(app, markdown)
            except Exception as error:
                moved.append(f"{name} (used by {user}): {type(error).__name__}: {error}")
    assert not moved, f"textual {version('textual')} moved private names:\n" + "\n".join(moved)


def _private(name: str) -> bool:
    """A name Python convention marks private (`_name`; not `__dunder__`, not mangled)."""
    return name.startswith("_") and not name.startswith("__")


def _defined_by(node: ast.ClassDef) -> set[str]:
    """The private names a class's source defines: in its body (methods, class attributes,
    `__slots__`) and by assignment to `self.<name>` in its methods."""
    names: set[str] = set()
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    slots = statement.value
                    if target.id == "__slots__" and isinstance(slots, ast.List | ast.Tuple):
                        names.update(
                            item.value
                            for item in slots.elts
                            if isinstance(item, ast.Constant) and isinstance(item.value, str)
                        )
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            names.add(statement.target.id)
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.ctx, ast.Store)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "self"
        ):
            names.add(inner.attr)
    return {name for name in names if _private(name)}


def _module_name(root: Path, path: Path, package: str) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    name = ".".join((package, *parts))
    return name.removesuffix(".__init__")


@functools.cache
def textual_classes() -> dict[tuple[str, str], frozenset[str]]:
    """Every class in Textual's source, by (module, class name), with the private names it
    defines (read from the source, so attributes set in methods count too)."""
    root = Path(textual.__file__).parent
    classes: dict[tuple[str, str], set[str]] = {}
    for path in root.rglob("*.py"):
        module = _module_name(root, path, "textual")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes.setdefault((module, node.name), set()).update(_defined_by(node))
    return {key: frozenset(names) for key, names in classes.items()}


def textual_defines(cls: type) -> dict[str, str]:
    """The private names Textual defines on `cls` (through its Textual bases), each with the
    Textual class that defines it."""
    classes = textual_classes()
    names: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.split(".")[0] != "textual":
            continue
        own = classes.get((base.__module__, base.__name__), frozenset()) | {
            name for name in vars(base) if _private(name)
        }
        names.update(dict.fromkeys(own, f"{base.__module__}.{base.__qualname__}"))
    return names


def _access(node: ast.AST) -> tuple[ast.expr, str, int] | None:
    """(the object, the private name, the line) when `node` reads or writes a private attribute:
    `obj._name`, or `getattr`/`setattr`/`hasattr(obj, "_name")`."""
    if isinstance(node, ast.Attribute) and _private(node.attr):
        return node.value, node.attr, node.lineno
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "setattr", "hasattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and _private(node.args[1].value)
    ):
        return node.args[0], node.args[1].value, node.lineno
    return None


def _textual_module(module: str | None) -> bool:
    parts = (module or "").split(".")
    return parts[0] == "textual" and any(_private(part) for part in parts[1:])


def _misuses(
    module: ModuleType, tree: ast.Module, everything_textual: frozenset[str], ours: frozenset[str]
) -> Iterator[tuple[int, str]]:
    """(line, what) for each private name of Textual a module of ours touches."""

    def visit(node: ast.AST, cls: type | None, scope: object) -> Iterator[tuple[int, str]]:
        for child in ast.iter_child_nodes(node):
            inner_cls, inner_scope = cls, scope
            if isinstance(child, ast.ClassDef):
                found = getattr(scope, child.name, None)
                inner_cls = found if isinstance(found, type) else None
                inner_scope = inner_cls
                if inner_cls is not None:
                    textual_names = textual_defines(inner_cls)
                    for name in sorted(_defined_by(child) & textual_names.keys()):
                        yield (
                            child.lineno,
                            (f"{child.name} defines {name}, which {textual_names[name]} defines"),
                        )
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner_scope = None  # a class made inside a function is not found by name
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if _textual_module(alias.name):
                        yield child.lineno, f"imports {alias.name}"
            elif (
                isinstance(child, ast.ImportFrom)
                and child.level == 0
                and (
                    _textual_module(child.module)
                    or (child.module == "textual" and any(_private(a.name) for a in child.names))
                )
            ):
                yield child.lineno, f"imports from {child.module}"
            access = _access(child)
            if access is not None:
                target, name, line = access
                receiver = ast.unparse(target)
                if receiver in {"self", "cls", "super()", "type(self)"}:
                    textual_names = textual_defines(cls) if cls is not None else {}
                    if name in textual_names:
                        yield line, f"{receiver}.{name} ({textual_names[name]})"
                elif name in everything_textual and name not in ours:
                    yield line, f"{receiver}.{name} (only Textual defines {name})"
            yield from visit(child, inner_cls, inner_scope)

    yield from visit(tree, None, module)


def _ours(tree: ast.Module) -> Iterator[str]:
    """The private names a module of ours defines: on its classes, and on the frozen
    dataclasses it sets attributes of (`object.__setattr__(obj, "_name", value)`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            yield from _defined_by(node)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "object.__setattr__"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            yield node.args[1].value


def our_modules() -> Iterator[tuple[str, ast.Module]]:
    """(the dotted name, the parsed source) of every module of Habakkuk."""
    root = REPO / "habakkuk"
    for path in sorted(root.rglob("*.py")):
        yield _module_name(root, path, "habakkuk"), ast.parse(path.read_text(encoding="utf-8"))


def test_no_module_but_textual_private_touches_a_private_name_of_textual() -> None:
    """Any `self._name` Textual defines on a class of ours that derives from Textual (read,
    written, overridden or called through `super()`), any `obj._name` that only Textual
    defines, and any import of a private module of Textual: each one belongs in
    textual_private.py, behind a function saying why, checked by this canary. (A private
    name of our own on a Textual class that Textual also defines would shadow Textual's:
    rename it.)"""
    modules = list(our_modules())
    guarded = _module_name(REPO / "habakkuk", REPO / GUARDED, "habakkuk")
    everything_textual = frozenset().union(*textual_classes().values())
    ours = frozenset(name for name, tree in modules if name != guarded for name in _ours(tree))
    found: list[str] = []
    for name, tree in modules:
        if name == guarded:
            continue
        module = importlib.import_module(name)
        for line, what in _misuses(module, tree, everything_textual, ours):
            found.append(f"{name.replace('.', '/')}.py:{line}: {what}")
    assert not found, f"private names of Textual outside {GUARDED}:\n" + "\n".join(found)


def _resolve(owner: str) -> object:
    """The module or class the dotted path `owner` names."""
    try:
        return importlib.import_module(owner)
    except ModuleNotFoundError:
        module, _, name = owner.rpartition(".")
        return getattr(importlib.import_module(module), name)


def _is_a(kind: str, owner: object, name: str) -> bool:
    if kind == "module":
        return importlib.util.find_spec(f"{getattr(owner, '__name__', '')}.{name}") is not None
    assert isinstance(owner, type), f"{owner!r} is not a class"
    found = inspect.getattr_static(owner, name, None)
    if kind == "method":
        return inspect.isroutine(found) or isinstance(found, classmethod | staticmethod)
    if kind == "property":
        return isinstance(found, property)
    return name in textual_defines(owner) and not (
        inspect.isroutine(found) or isinstance(found, property)
    )


def test_each_private_name_textual_private_uses_is_declared_and_still_there() -> None:
    """The names textual_private.py touches are those its PRIVATE_NAMES declares, and each
    is still defined by its owner in the pinned Textual, as a method, an attribute, a
    property or a module, as declared."""
    tree = ast.parse((REPO / GUARDED).read_text(encoding="utf-8"))
    touched: set[str] = set()
    for node in ast.walk(tree):
        access = _access(node)
        if access is not None:
            touched.add(access[1])
        elif isinstance(node, ast.ImportFrom) and _textual_module(node.module):
            touched.update(part for part in (node.module or "").split(".") if _private(part))
    declared = {private.name for private in textual_private.PRIVATE_NAMES}
    assert touched == declared, (
        f"{GUARDED} touches names PRIVATE_NAMES does not declare: {sorted(touched - declared)}; "
        f"declares names it no longer touches: {sorted(declared - touched)}"
    )
    moved = [
        f"{private.owner}.{private.name} (used by {GUARDED}: {private.used_by}) "
        f"is no longer a {private.kind}"
        for private in textual_private.PRIVATE_NAMES
        if not _is_a(private.kind, _resolve(private.owner), private.name)
    ]
    assert not moved, f"textual {version('textual')} moved private names:\n" + "\n".join(moved)
