"""A footer that shows whole keys, the most important first, and drops what does not fit.

Textual's footer lays every key in one scrolled row: at 80 columns an approval's
y/a/n/esc pushed the section keys off the edge, cut one mid-word ("^t C") and left
no way to see the rest. This one keeps the palette key (Ctrl+P lists every key)
at the right edge and fills the row in priority order: the focused widget's keys,
then the screen's, then the app's, with the key for the screen already shown last.
Keys that do not fit are left out whole.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from habakkuk.engine.i18n import t

# Cells a compact key takes besides its text: the space between key and description and
# the margin after it (see Footer's compact CSS).
KEY_EXTRA = 2
# The palette key: border on the left, a space between, padding on the right (app.tcss).
PALETTE_EXTRA = 3


@runtime_checkable
class _KeyItem(Protocol):
    """Textual's footer key widget as used here (its class is not exported)."""

    action: str
    description: str


def key_description(binding: Binding) -> str:
    """A key's word in the footer in the language in use: the catalog's `tui.key.<binding
    id>`, else (no id, or a key no catalog has) the binding's own English description."""
    if binding.id is None:
        return binding.description
    name = f"tui.key.{binding.id}"
    text = t(name)
    return binding.description if text == name else text


class KeyFooter(Footer):
    """The compact footer, fitted to the screen's width by priority."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._recompose_queued = False

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Rebuild the keys once per refresh however often the bindings change before it.

        Textual's footer queues one rebuild per change; a screen that moves the focus and
        the cursor while it fills (the board: a change per table) rebuilt every key a
        dozen times in one frame, which was most of the board's time to first paint.
        """
        waits = screen.app.app_focus and self.is_attached and screen is self.screen
        if waits and self._recompose_queued:
            return  # the queued rebuild reads the bindings as they are by then
        self._recompose_queued = bool(waits)
        super().bindings_changed(screen)

    async def recompose(self) -> None:
        self._recompose_queued = False
        await super().recompose()

    def compose(self) -> ComposeResult:
        # Textual's footer makes one key widget per action, the focused widget's first.
        items = list(super().compose())
        # Its words are the bindings' English descriptions: each in the language in use
        # (the first shown binding of an action is the one Textual's footer used; a
        # grouped key has no word of its own and keeps none).
        words: dict[str, str] = {}
        for _, binding, _, _ in self.screen.active_bindings.values():
            if binding.show:
                words.setdefault(binding.action, key_description(binding))
        for item in items:
            if isinstance(item, _KeyItem) and item.description and item.action in words:
                item.description = words[item.action]
        palette = [item for item in items if item.has_class("-command-palette")]
        keys = [item for item in items if not item.has_class("-command-palette")]
        width = self.screen.size.width or self.app.size.width
        width -= sum(_cells(item) + PALETTE_EXTRA for item in palette)
        # The app's keys follow the widget's and the screen's, in the app's order (a
        # focused text field that also binds ctrl+d put the app's Board key first), and
        # going to the screen already shown is the least use of the row.
        app_order = {
            binding.action: rank
            for rank, binding in enumerate(self.app.BINDINGS)
            if isinstance(binding, Binding)
        }
        here = f"go('{self.screen.id}')"
        keys.sort(key=lambda item: app_order.get(getattr(item, "action", ""), -1))
        keys.sort(key=lambda item: getattr(item, "action", "") == here)
        for item in keys:
            cells = _cells(item) + KEY_EXTRA
            if cells > width:
                break  # keep the order: a later key never takes an earlier one's place
            width -= cells
            yield item
        yield from palette

    def on_resize(self, event: events.Resize) -> None:
        if self.is_attached and not self._recompose_queued:
            self._recompose_queued = True
            self.call_after_refresh(self.recompose)


def _cells(item: Widget) -> int:
    """The width of a footer key's text: its key and its description."""
    return cell_len(str(getattr(item, "key_display", "")) + str(getattr(item, "description", "")))
