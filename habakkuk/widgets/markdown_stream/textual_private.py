"""Every private name of Textual that Habakkuk uses, each behind one small function.

Textual is pinned exactly in pyproject.toml because of this module: none of these names
is part of Textual's API, so any release may move them. Upgrade Textual together with
tests/tui/test_textual_private_canary.py, which checks each name used here (and fails
with the name and the function that uses it). No other module of Habakkuk touches a
private name of Textual (the canary reads every module for one): add new ones here, each
behind a function saying why it is needed, declared in `PRIVATE_NAMES`, with a canary
check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from markdown_it.token import Token
    from textual.binding import Binding
    from textual.dom import DOMNode
    from textual.geometry import Region, Size, Spacing
    from textual.layout import WidgetPlacement
    from textual.screen import Screen
    from textual.strip import Strip
    from textual.widget import Widget
    from textual.widgets import Markdown
    from textual.widgets.markdown import MarkdownBlock


@dataclass(frozen=True)
class PrivateName:
    """A private name of Textual this module uses, where Textual defines it, and what it is.

    The canary checks that this list and the names the functions below touch agree, and
    that each is still defined by `owner` in the pinned Textual as that `kind`.
    """

    owner: str  # the dotted path of the class (or the package) that defines it
    name: str
    kind: Literal["method", "attribute", "property", "module"]
    used_by: str  # the function of this module that uses it


PRIVATE_NAMES: Final[tuple[PrivateName, ...]] = (
    PrivateName("textual", "_compositor", "module", "draw_widget"),
    PrivateName(
        "textual.widget.Widget", "_clear_arrangement_cache", "method", "forget_arrangement"
    ),
    PrivateName("textual.layout.WidgetPlacement", "_replace", "method", "replace_placement"),
    PrivateName("textual.widgets.Markdown", "_parse_markdown", "method", "parse_blocks"),
    PrivateName("textual.widgets.Markdown", "_markdown", "attribute", "set_document_source"),
    PrivateName("textual.widgets.markdown.MarkdownBlock", "_blocks", "attribute", "holds_blocks"),
    PrivateName(
        "textual.widgets.markdown.MarkdownBlock", "_copy_context", "method", "show_block_as"
    ),
    PrivateName("textual.widgets.markdown.MarkdownBlock", "_content", "attribute", "show_block_as"),
    PrivateName(
        "textual.widgets.markdown.MarkdownFence", "_highlighted_code", "attribute", "show_block_as"
    ),
    PrivateName("textual.screen.Screen", "_update_timer", "property", "draw_updates_promptly"),
    PrivateName("textual.timer.Timer", "_skip", "attribute", "draw_updates_promptly"),
    PrivateName("textual.widget.Widget", "_anchor_released", "attribute", "anchor_released"),
    PrivateName("textual.dom.DOMNode", "_bindings", "attribute", "own_bindings"),
)


def draw_widget(widget: Widget, size: Size) -> list[Strip]:
    """The lines `widget` and its arranged children draw at `size`.

    Uses `textual._compositor.Compositor` (`reflow`, `render_strips`): a compositor of
    the widget's own draws exactly what the screen's would. Imported here, not at module
    level: only freezing a volume needs it.
    """
    from textual._compositor import Compositor

    compositor = Compositor()
    compositor.reflow(widget, size)
    return compositor.render_strips(size)


def forget_arrangement(widget: Widget) -> None:
    """Make the next layout pass arrange `widget`'s children again.

    Uses `Widget._clear_arrangement_cache`: a volume that starts or stops standing in
    for its blocks changes its arrangement without a change Textual would notice.
    """
    widget._clear_arrangement_cache()


def replace_placement(
    placement: WidgetPlacement, *, region: Region | None = None, margin: Spacing | None = None
) -> WidgetPlacement:
    """`placement` with another region and/or margin.

    Uses `WidgetPlacement._replace` (it is a NamedTuple) and its fields `region`, `margin`.
    """
    if region is not None:
        placement = placement._replace(region=region)
    if margin is not None:
        placement = placement._replace(margin=margin)
    return placement


def parse_blocks(markdown: Markdown, tokens: Iterable[Token]) -> Iterable[MarkdownBlock]:
    """The (unmounted) top-level blocks `markdown` builds from markdown-it `tokens`.

    Uses `Markdown._parse_markdown`: the block building of `Markdown.update`, without
    mounting, so finished blocks can be built once and the tail alone rebuilt.
    """
    return markdown._parse_markdown(tokens)


def set_document_source(markdown: Markdown, text: str) -> None:
    """Make `text` the source `markdown` reports (`Markdown.source`, blocks' `source`).

    Uses `Markdown._markdown`, where `Markdown.update` keeps the text it rendered.
    """
    markdown._markdown = text


def holds_blocks(block: MarkdownBlock) -> bool:
    """Whether an unmounted `block` has blocks of its own to mount (a list, quote, table).

    Uses `MarkdownBlock._blocks`, the children a block composes.
    """
    return bool(block._blocks)


def show_block_as(old: MarkdownBlock, new: MarkdownBlock) -> None:
    """Make the mounted `old` show the inline content (or highlighted code) of `new`,
    an unmounted block of the same class.

    Uses `MarkdownBlock._copy_context` and `_content`, and `MarkdownFence._highlighted_code`.
    """
    from textual.widgets.markdown import MarkdownFence

    old._copy_context(new)
    if isinstance(old, MarkdownFence) and isinstance(new, MarkdownFence):
        old.set_content(new._highlighted_code)
    else:
        old.set_content(new._content)


def draw_updates_promptly(screen: Screen[Any]) -> None:
    """Let `screen` draw a due update at once, even after a frame that overran.

    Textual's screen update timer (`Screen._update_timer`, a `Timer` made with
    `skip=True`), after a frame that overran its 1/60 s period, skips the next period
    too (`Timer._skip`, read in `Timer._run`): a key typed while a streamed reply was
    laid out waited up to 33 ms more before it was drawn.
    """
    screen._update_timer._skip = False


def anchor_released(widget: Widget) -> bool:
    """Whether the user scrolled an anchored `widget` away from its end.

    Textual keeps an anchored view at the bottom until the user scrolls away, which
    sets `Widget._anchor_released` (set in `Widget.release_anchor`).
    """
    return widget._anchor_released


def own_bindings(node: DOMNode, key: str) -> Sequence[Binding]:
    """The bindings `node` itself has for `key` (its class's and inherited `BINDINGS`,
    after any keymap), in the order Textual would try them.

    Uses `DOMNode._bindings`, the node's own `BindingsMap`: Textual offers only the
    bindings active on the whole screen (`Screen.active_bindings`), one per key, where an
    ancestor's priority binding hides the node's. The composer runs its own bindings the
    moment a key reaches it (see `Composer`), so it needs exactly these.
    """
    return node._bindings.key_to_bindings.get(key, ())
