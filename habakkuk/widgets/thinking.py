"""The model's thinking: dimmed, collapsible, updated at most every 80 ms while it streams."""

from __future__ import annotations

import time

from textual.content import Content
from textual.timer import Timer
from textual.widgets import Collapsible, Static

from habakkuk.widgets.markdown_stream import RENDER_INTERVAL


class ThinkingView(Collapsible):
    """Thinking text in a collapsible block (Enter toggles it when focused)."""

    DEFAULT_CSS = """
    ThinkingView { border: none; padding: 0; margin: 0 0 0 1; background: transparent; }
    ThinkingView > Contents { padding: 0 0 0 2; }
    ThinkingView Static { color: $text-muted; text-style: italic; }
    """

    def __init__(self, text: str = "", *, collapsed: bool = False) -> None:
        body = Static(Content(text))
        super().__init__(body, title="thinking", collapsed=collapsed)
        self.text = text
        self._body = body
        self._render_timer: Timer | None = None
        self._render_scheduled = False
        self._last_render = 0.0

    def feed(self, fragment: str) -> None:
        """Add streamed thinking; shown within RENDER_INTERVAL."""
        self.text += fragment
        if not self._render_scheduled:
            self._render_scheduled = True
            wait = RENDER_INTERVAL - (time.monotonic() - self._last_render)
            if wait > 0:
                self._render_timer = self.set_timer(wait, self._render_now)
            else:
                self.call_later(self._render_now)

    def _render_now(self) -> None:
        self._render_timer = None
        self._render_scheduled = False
        self._last_render = time.monotonic()
        self._body.update(Content(self.text))

    def finish(self) -> None:
        """Show all of it (the user folds it with Enter; folding here would move the view)."""
        if self._render_timer is not None:
            self._render_timer.stop()
            self._render_timer = None
        self._body.update(Content(self.text))
