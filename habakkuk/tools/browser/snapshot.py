"""The accessibility tree as indented lines with [ref=N] (spec 000 "Browser": Snapshots).

`render` turns Accessibility.getFullAXTree's nodes into lines: headings, text, landmarks,
lists, tables and every interactive element with its state and a ref. Ignored nodes and
unnamed containers add no line (their children move up), text without letters or digits
is dropped, as is text that only repeats its parent's name, and a link to the page's own
origin shows only its path. `RefTable` keeps a ref's number for the same element, forgets
a tab's refs when its main frame navigates, and never reuses a number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SNAPSHOT_LIMIT = 24_000
MAX_NAME = 160
FIRST_OPTIONS = 5

INTERACTIVE = frozenset(
    {
        "link", "button", "textbox", "searchbox", "checkbox", "radio", "combobox",
        "listbox", "option", "menuitem", "menuitemcheckbox", "menuitemradio", "tab",
        "switch", "slider", "spinbutton", "treeitem", "textfield", "ComboBoxMenuButton",
        "PopUpButton", "ToggleButton", "DisclosureTriangle",
    }
)  # fmt: skip
SHOWN = frozenset(
    {
        "heading", "banner", "navigation", "main", "contentinfo", "complementary", "form",
        "search", "region", "article", "dialog", "alertdialog", "alert", "list", "listitem",
        "table", "row", "cell", "columnheader", "rowheader", "grid", "gridcell", "img",
        "image", "figure", "tablist", "tabpanel", "menu", "menubar", "tree", "Iframe",
        "IframePresentational", "status", "code", "blockquote", "term", "definition",
    }
)  # fmt: skip
SKIPPED = frozenset({"InlineTextBox", "LineBreak", "ListMarker"})
TEXT = frozenset({"StaticText", "text"})
STATES = ("checked", "selected", "expanded", "pressed", "disabled", "required", "readonly")


@dataclass
class RefTable:
    """Refs of one browser: (tab, backend DOM node id) <-> N, numbers never reused."""

    next_ref: int = 1
    _by_node: dict[tuple[str, int], int] = field(default_factory=dict)
    _by_ref: dict[int, tuple[str, int]] = field(default_factory=dict)

    def ref(self, tab: str, backend: int) -> int:
        """The ref of a node, the same number as last time for the same element."""
        key = (tab, backend)
        found = self._by_node.get(key)
        if found is None:
            found = self.next_ref
            self.next_ref += 1
            self._by_node[key] = found
            self._by_ref[found] = key
        return found

    def lookup(self, ref: int) -> tuple[str, int] | None:
        """(tab, backend node id) of a live ref, None when unknown or forgotten."""
        return self._by_ref.get(ref)

    def forget(self, tab: str) -> None:
        """A tab's main frame navigated: its refs go (their numbers are not reused)."""
        for key in [k for k in self._by_node if k[0] == tab]:
            del self._by_ref[self._by_node.pop(key)]


def _value(node: Mapping[str, Any], key: str) -> Any:
    holder = node.get(key)
    return holder.get("value") if isinstance(holder, dict) else None


def _clean(text: Any) -> str:
    words = " ".join(str(text or "").split())
    return words if len(words) <= MAX_NAME else words[: MAX_NAME - 1] + "…"


def _has_alnum(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _properties(node: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for prop in node.get("properties") or ():
        value = prop.get("value") or {}
        found[str(prop.get("name"))] = value.get("value")
    return found


def _short_url(url: str, origin: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if f"{parts.scheme}://{parts.netloc}" == origin:
        return url[len(origin) :] or "/"
    return url


@dataclass
class Frame:
    """Another frame's tree to inline under its <iframe> (nodes), or its URL only."""

    url: str
    nodes: list[dict[str, Any]] | None  # None: a cross-process frame, shown as one line


@dataclass
class _Renderer:
    nodes: dict[str, dict[str, Any]]
    ref_of: Callable[[int], int]
    origin: str
    frames: Mapping[int, Frame]  # backend id of an <iframe> -> its content
    lines: list[str] = field(default_factory=list)

    def walk(self, root: str, depth: int, parent_name: str) -> None:
        stack: list[tuple[str, int, str]] = [(root, depth, parent_name)]
        while stack:
            node_id, level, above = stack.pop()
            node = self.nodes.get(node_id)
            if node is None:
                continue
            role = (node.get("role") or {}).get("value")
            if role in SKIPPED:
                continue
            if role in TEXT:  # its children are inline text boxes: nothing more to show
                self.line(node, level, above)
                continue
            shown, name = self.line(node, level, above)
            child_level = level + 1 if shown else level
            child_above = name if shown else above
            children = [str(c) for c in node.get("childIds") or ()]
            backend = node.get("backendDOMNodeId")
            frame = self.frames.get(backend) if isinstance(backend, int) else None
            if frame is not None:
                self.frame(frame, child_level)
            if _value(node, "role") in ("combobox", "listbox", "ComboBoxMenuButton", "PopUpButton"):
                self.options(children, child_level)
                continue
            stack.extend((c, child_level, child_above) for c in reversed(children))

    def frame(self, frame: Frame, level: int) -> None:
        pad = "  " * level
        if frame.nodes is None:
            self.lines.append(f'{pad}- frame "{frame.url}" (another site: open it to see it)')
            return
        inner = _Renderer({str(n["nodeId"]): n for n in frame.nodes}, self.ref_of, self.origin, {})
        if frame.nodes:
            inner.walk(str(frame.nodes[0]["nodeId"]), level, "")
        self.lines.extend(inner.lines)

    def options(self, children: list[str], level: int) -> None:
        found: list[dict[str, Any]] = []
        todo = list(children)
        while todo:
            node = self.nodes.get(todo.pop(0))
            if node is None:
                continue
            if _value(node, "role") == "option":
                found.append(node)
            else:
                todo[:0] = [str(c) for c in node.get("childIds") or ()]
        pad = "  " * level
        for node in found[:FIRST_OPTIONS]:
            self.line(node, level, "")
        if len(found) > FIRST_OPTIONS:
            self.lines.append(f"{pad}- … {len(found) - FIRST_OPTIONS} more options")

    def line(self, node: dict[str, Any], level: int, above: str) -> tuple[bool, str]:
        """Add the node's line if it has one; (shown, its name)."""
        if node.get("ignored"):
            return False, above
        role = str(_value(node, "role") or "")
        if role in SKIPPED:
            return False, above
        name = _clean(_value(node, "name"))
        pad = "  " * level
        if role in TEXT:
            if name and _has_alnum(name) and name != above:
                self.lines.append(f"{pad}- text: {name}")
            return False, above
        props = _properties(node)
        backend = node.get("backendDOMNodeId")
        interactive = role in INTERACTIVE or (bool(props.get("focusable")) and role not in (
            "RootWebArea", "WebArea", "generic", "none"
        ))  # fmt: skip
        if not interactive and role not in SHOWN and not (role == "paragraph" and name):
            return False, above
        if not interactive and not name and role in ("img", "image", "region", "figure"):
            return False, above
        parts = [f"{pad}- {role}"]
        if name:
            parts.append(f'"{name}"')
        if role == "heading" and props.get("level"):
            parts.append(f"[level={props['level']}]")
        for state in STATES:
            value = props.get(state)
            if value in (True, "true"):
                parts.append(f"[{state}]")
            elif value == "mixed":
                parts.append(f"[{state}=mixed]")
        if props.get("focused"):
            parts.append("[focused]")
        value = _clean(_value(node, "value"))
        if value and value != name and role not in ("link",):
            parts.append(f'value="{value}"')
        url = props.get("url")
        if role == "link" and isinstance(url, str) and url:
            parts.append(f"({_short_url(url, self.origin)})")
        if interactive and isinstance(backend, int):
            parts.append(f"[ref={self.ref_of(backend)}]")
        self.lines.append(" ".join(parts))
        return True, name


def render(
    nodes: list[dict[str, Any]],
    *,
    ref_of: Callable[[int], int],
    url: str,
    frames: Mapping[int, Frame] | None = None,
) -> str:
    """The indented lines of an accessibility tree (the first node is its root)."""
    if not nodes:
        return ""
    try:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
    except ValueError:
        origin = ""
    renderer = _Renderer({str(n["nodeId"]): n for n in nodes}, ref_of, origin, frames or {})
    roots = [n for n in nodes if not n.get("parentId")] or nodes[:1]
    for root in roots:
        renderer.walk(str(root["nodeId"]), 0, "")
    return "\n".join(renderer.lines)


def cut(text: str, offset: int, limit: int = SNAPSHOT_LIMIT) -> tuple[str, int | None]:
    """Up to `limit` characters of `text` from `offset`, ended at a line break; and the
    offset that continues it (None when this is the end)."""
    if offset >= len(text):
        return "", None
    end = offset + limit
    if end >= len(text):
        return text[offset:], None
    newline = text.rfind("\n", offset, end)
    if newline > offset:
        end = newline + 1
    return text[offset:end], end
