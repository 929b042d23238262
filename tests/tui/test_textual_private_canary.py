"""Canary for the private names of Textual that Habakkuk reaches into.

habakkuk/widgets/markdown_stream/textual_private.py uses names Textual does not
promise to keep, so pyproject.toml pins Textual exactly. When Textual is upgraded
(the pin changed), these tests say loudly which name moved and which function of
textual_private.py uses it. This is the one test that looks at Textual's private
names on purpose; it imports them by name, as the module under guard does.
"""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from textual.app import App, ComposeResult
from textual.content import Content
from textual.layout import WidgetPlacement
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence

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
        requirement.split("==", 1)[1].strip()
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


# Attribute names that only textual_private.py may touch (as `.name`), in modules using Textual.
CONFINED = re.compile(
    r"\.(_compositor|_clear_arrangement_cache|_replace|_parse_markdown|_markdown|_content"
    r"|_blocks|_copy_context|_highlighted_code|_update_timer|_skip)\b"
)


def test_only_textual_private_touches_textual_private_names() -> None:
    found: list[str] = []
    for path in sorted((REPO / "habakkuk").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        text = path.read_text(encoding="utf-8")
        if relative == GUARDED or "textual" not in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if CONFINED.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, f"private names of Textual outside {GUARDED}:\n" + "\n".join(found)
