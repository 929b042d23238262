"""Markdown that streams: fragments are shown at most every 80 ms, never blocking input."""

from __future__ import annotations

import time

from textual.timer import Timer
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

# The spec's bound on re-rendering while text streams in.
RENDER_INTERVAL = 0.08
# Each render lays out the whole document, so a long reply renders less often: the
# interval grows by RENDER_INTERVAL per GROWTH_CHARS of text, up to MAX_INTERVAL.
GROWTH_CHARS = 16_000
MAX_INTERVAL = 0.4


def render_interval(length: int) -> float:
    """Seconds between renders of a streaming document of `length` characters."""
    return min(MAX_INTERVAL, RENDER_INTERVAL * max(1.0, length / GROWTH_CHARS))


class StreamingMarkdown(Markdown):
    """A Markdown document fed by fragments.

    `feed` only buffers; a timer hands the buffer to Textual's MarkdownStream at
    most every RENDER_INTERVAL (less often as the document grows, see
    `render_interval`), and the stream coalesces further if parsing falls behind,
    so a fast model never starves key presses.
    """

    DEFAULT_CSS = """
    StreamingMarkdown { margin: 0; padding: 0 1; background: transparent; }
    """

    def __init__(self, text: str = "", **kwargs: object) -> None:
        super().__init__(text, **kwargs)  # type: ignore[arg-type]
        self.text = text
        self.renders = 0
        self._buffer: list[str] = []
        self._stream: MarkdownStream | None = None
        self._flush_timer: Timer | None = None
        self._flush_scheduled = False
        self._last_render = 0.0

    def feed(self, fragment: str) -> None:
        """Add streamed text; it appears within RENDER_INTERVAL."""
        if not fragment:
            return
        self.text += fragment
        self._buffer.append(fragment)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            wait = render_interval(len(self.text)) - (time.monotonic() - self._last_render)
            if wait > 0:
                self._flush_timer = self.set_timer(wait, self._flush)
            else:
                # A zero-delay Timer is not allowed; run it as soon as the widget is free.
                self.call_later(self._flush)

    async def _flush(self) -> None:
        self._flush_timer = None
        self._flush_scheduled = False
        if not self._buffer:
            return
        chunk = "".join(self._buffer)
        self._buffer.clear()
        self._last_render = time.monotonic()
        self.renders += 1
        if self._stream is None:
            self._stream = Markdown.get_stream(self)
        await self._stream.write(chunk)

    async def finish(self) -> None:
        """Show whatever is buffered and stop streaming."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        await self._flush()
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()

    @property
    def streaming(self) -> bool:
        return self._stream is not None or bool(self._buffer)
