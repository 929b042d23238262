"""The conversation: messages as they were stored, and the running turn as it streams.

The view is fed two ways: `load` renders a stored transcript (read through the
facade), and `handle` applies bus events of the running turn. Streamed text goes
into a StreamingMarkdown segment per model call; thinking into a ThinkingView;
tool calls into ToolCards keyed by call id.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual import events
from textual.containers import VerticalScroll
from textual.errors import NoWidget
from textual.widget import Widget

from habakkuk.engine.events import (
    EventPayload,
    ModelReplied,
    ToolCallStreamed,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnReset,
    TurnText,
    TurnThinking,
)
from habakkuk.engine.llm.types import TextBlock, ThinkingBlock, ToolUseBlock
from habakkuk.engine.toolkit.outcome import stored_outcome
from habakkuk.widgets.composer import Composer
from habakkuk.widgets.markdown_stream import StreamingMarkdown, estimate_height
from habakkuk.widgets.markdown_stream.fence import warm_common_lexers
from habakkuk.widgets.markdown_stream.textual_private import anchor_released
from habakkuk.widgets.notice import Notice
from habakkuk.widgets.thinking import ThinkingView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage

if TYPE_CHECKING:
    from textual.screen import Screen

    from habakkuk.engine.sessions import StoredMessage

# How much of a loaded transcript, from the bottom, is built at once (in screens).
BUILT_SCREENS = 3
# How many of a loaded transcript's widgets, from the bottom, are mounted at once; older
# ones are mounted this many at a time as the reader scrolls near the top (a session of
# 1,000 messages would otherwise mount and lay out every one before its last is shown).
MOUNTED_WIDGETS = 30
# How close to the top (in screens) the reader comes before older widgets are mounted.
MOUNT_AHEAD_SCREENS = 2


class MessageView(VerticalScroll, can_focus=True):
    """The scrolling conversation, kept at the bottom while new text arrives."""

    DEFAULT_CSS = """
    MessageView { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="messages")
        self.session = ""
        self.cards: dict[str, ToolCard] = {}
        self._text: StreamingMarkdown | None = None
        self._thinking: ThinkingView | None = None
        # Widgets of the model call now streaming: void if the router retries (turn.reset).
        self._call_widgets: list[Widget] = []
        # The widget at the top of the visible area after the last layout pass, and where it
        # was in the content (see _layout_refreshed).
        self._reading: list[tuple[Widget, int]] | None = None
        # Makers of the loaded transcript's widgets not mounted yet (the oldest first), the
        # batch queued to mount, whether a batch is queued or mounting, how many loads there
        # were (a batch of an earlier one is dropped), and the first widget of a jump to the
        # top once all are mounted.
        self._older: list[Callable[[], Widget]] = []
        self._queued: list[Callable[[], Widget]] = []
        self._busy = False
        self._loads = 0
        self._home: Widget | None = None

    def on_mount(self) -> None:
        # Before the first stored reply with code is opened (see warm_common_lexers).
        warm_common_lexers()
        self.anchor()
        self.screen.screen_layout_refresh_signal.subscribe(self, self._layout_refreshed)

    def _layout_refreshed(self, screen: Screen[Any]) -> None:
        """Keep what the reader looks at in place when something above it changed height.

        History replies above the visible area have an estimated height until they are
        built (see StreamingMarkdown): a wrong estimate would move the text being read. The
        widget at the top of the visible area is noted after each layout pass; if its place
        in the content moved by the next one, the scroll position moves by as much. Scrolling
        moves nothing in the content, so it is left alone.
        """
        if self._home is not None:
            # A jump to the top waits for the older widgets to be laid out, then goes there.
            if not (self._home.is_attached and self._home.region):
                return
            self._home = None
            self._reading = None
            super().scroll_home(animate=False, immediate=True)
            return
        self._mount_older_if_near()
        # Textual keeps an anchored view at the bottom itself until the user scrolls away.
        if self.is_anchored and not anchor_released(self):
            self._reading = None
            return
        region = self.content_region
        # The scroll offset this layout pass placed the widgets with.
        offset = self.scroll_offset.y
        moved = 0
        if self._reading is not None:
            # The widget read (a block inside a reply, whose own place moves as blocks above
            # it in the reply are built), or the reply it is in if the reply dropped it.
            for widget, was in self._reading:
                if widget.is_attached and widget.region:
                    moved = widget.region.y - region.y + offset - was
                    break
            if moved:
                # Still the ones read, where they are now (this pass's map predates the
                # scroll, so it cannot say).
                self._reading = [(widget, was + moved) for widget, was in self._reading]
                self.scroll_to(y=offset + moved, animate=False, immediate=True)
                return
        self._reading = None
        if region:
            try:
                widget, _ = screen.get_widget_at(region.x + 2, region.y)
            except NoWidget:
                widget = self
            if widget is not self and self in widget.ancestors:
                reading = [(widget, widget.region.y - region.y + offset)]
                while widget.parent is not self and isinstance(widget.parent, Widget):
                    widget = widget.parent
                reading.append((widget, widget.region.y - region.y + offset))
                self._reading = reading

    # -- older widgets of a loaded transcript ------------------------------------------------

    @property
    def unmounted(self) -> int:
        """How many widgets of the loaded transcript are still to be mounted (older ones)."""
        return len(self._older) + len(self._queued)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._mount_older_if_near()

    def _mount_older_if_near(self) -> None:
        """Mount the next batch of older widgets when the reader is near the top."""
        if not self._older or self._busy or not self.is_mounted:
            return
        if self.scroll_y > MOUNT_AHEAD_SCREENS * max(self.size.height, 1):
            return
        batch = self._older[-MOUNTED_WIDGETS:]
        del self._older[-MOUNTED_WIDGETS:]
        self._queued = batch
        self._busy = True
        # After this frame; above what is shown: _layout_refreshed keeps the text being
        # read in place.
        self.call_after_refresh(self._mount_batch, batch, self._loads)

    async def _mount_batch(self, batch: list[Callable[[], Widget]], loads: int) -> None:
        try:
            # Not when the view was loaded again, or a jump to the top took the batch.
            if self._queued is not batch or loads != self._loads or not self.is_attached:
                return
            self._queued = []
            await self.mount_all([make() for make in batch], before=0)
        finally:
            if loads == self._loads:
                self._busy = False
        self._mount_older_if_near()

    def scroll_home(self, *args: Any, **kwargs: Any) -> None:
        """The top of the conversation: its older widgets are mounted first, then the view
        goes to the first one (see _layout_refreshed)."""
        # A batch queued but not begun goes with the rest (it would land above them).
        older = self._older + self._queued
        if not older:
            super().scroll_home(*args, **kwargs)
            return
        self._older = []
        self._queued = []
        widgets = [make() for make in older]
        self._home = widgets[0]
        self.release_anchor()
        self.mount_all(widgets, before=0)

    # -- keys --------------------------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        """Text typed while a card or the view has the focus goes to the composer.

        Keys bound where the focus is (Enter opens a card) keep their meaning; a
        printable key nobody binds would otherwise be dropped.
        """
        if not event.is_printable or not event.character:
            return
        if event.key in self.screen.active_bindings:
            return
        if self._type_into_composer(event.character):
            event.stop()
            event.prevent_default()

    def on_paste(self, event: events.Paste) -> None:
        """A paste while a card or the view has the focus goes to the composer too."""
        if event.text and self._type_into_composer(event.text):
            event.stop()

    def _type_into_composer(self, text: str) -> bool:
        composers = self.screen.query(Composer)
        if not composers:
            return False
        composers.first().type_text(text)
        return True

    def page(self, where: str) -> None:
        """Scroll for the composer's keys: page_up, page_down, top or bottom."""
        if where == "page_up":
            self.scroll_page_up(animate=False)
        elif where == "page_down":
            self.scroll_page_down(animate=False)
        elif where == "top":
            self.scroll_home(animate=False)
        elif where == "bottom":
            self.scroll_end(animate=False, immediate=True)
            self.anchor()

    # -- history ---------------------------------------------------------------------------

    async def load(self, session: str, messages: list[StoredMessage]) -> None:
        """Show a stored transcript (replaces what is shown)."""
        # Before the first await: a batch of the last transcript queued now is dropped.
        self._older = []
        self._queued = []
        self._busy = False
        self._loads += 1
        self._home = None
        await self.remove_children()
        self.session = session
        self.cards = {}
        self._text = None
        self._thinking = None
        self._call_widgets = []
        makers = self._makers(session, messages)
        # Only the bottom is made and mounted now; older widgets when scrolled near.
        self._older = makers[:-MOUNTED_WIDGETS]
        widgets = [make() for make in makers[-MOUNTED_WIDGETS:]]
        self._build_bottom(widgets)
        if widgets:
            await self.mount_all(widgets)
        self.scroll_end(animate=False, immediate=True)
        self.anchor()

    def _makers(self, session: str, messages: list[StoredMessage]) -> list[Callable[[], Widget]]:
        """A maker per widget of a stored transcript, in order; a tool card is made with
        its call's outcome (its result is in a later message)."""
        makers: list[Callable[[], Widget]] = []
        outcomes: dict[str, tuple[str, str]] = {}
        for stored in messages:
            message = stored.message
            if message.role == "user":
                for result in message.tool_results:
                    status = stored_outcome(result.text, result.is_error)
                    outcomes[result.tool_use_id] = (status, result.text[:500])
                typed = _typed_text(stored)
                if typed:
                    makers.append(partial(UserMessage, typed))
                continue
            for block in message.blocks:
                if isinstance(block, ThinkingBlock) and block.text:
                    makers.append(partial(ThinkingView, block.text, collapsed=True))
                elif isinstance(block, TextBlock) and block.text.strip():
                    makers.append(partial(StreamingMarkdown, block.text))
                elif isinstance(block, ToolUseBlock):
                    makers.append(partial(self._stored_card, session, block, outcomes))
        return makers

    def _stored_card(
        self, session: str, block: ToolUseBlock, outcomes: dict[str, tuple[str, str]]
    ) -> ToolCard:
        status, preview = outcomes.get(block.tool_use_id, ("pending", ""))
        card = ToolCard(
            block.tool_use_id, block.tool, session=session, title=_title(block.input), status=status
        )
        card.preview = preview
        if session == self.session:
            self.cards[card.call_id] = card
        return card

    def _build_bottom(self, widgets: list[Widget]) -> None:
        """Replies at the bottom, where the view opens, are built at once (about
        BUILT_SCREENS screens of them); the others build their blocks when scrolled near."""
        width = max(self.size.width - 4, 20)
        budget = BUILT_SCREENS * max(self.size.height, 10)
        for widget in reversed(widgets):
            if budget <= 0:
                break
            if isinstance(widget, StreamingMarkdown):
                widget.build_from_end(budget)
                budget -= estimate_height(widget.text.split("\n"), width)
            else:
                # User messages, tool cards and notes take a few lines.
                budget -= 3

    async def clear(self, session: str = "") -> None:
        await self.load(session, [])

    # -- live events -----------------------------------------------------------------------

    async def add_user(self, text: str) -> None:
        """Show what the user just sent."""
        await self._close_segments()
        await self.mount(UserMessage(text))
        self.anchor()

    async def note(self, text: str, *, error: bool = False) -> None:
        """A one-line note in the conversation."""
        await self._close_segments()
        await self.mount(Notice(text, error=error))
        self.anchor()

    async def handle(self, event: EventPayload) -> None:
        """Apply one bus event of this session's running turn."""
        match event:
            case TurnText(text=text):
                if self._text is None:
                    self._text = StreamingMarkdown()
                    self._call_widgets.append(self._text)
                    await self.mount(self._text)
                self._text.feed(text)
            case TurnThinking(text=text):
                if self._thinking is None:
                    self._thinking = ThinkingView()
                    self._call_widgets.append(self._thinking)
                    await self.mount(self._thinking)
                self._thinking.feed(text)
            case ToolCallStreamed(call_id=call_id, tool=tool):
                await self._close_segments()
                self._card(call_id, tool, mount_new=True)
            case ToolStarted(call_id=call_id, tool=tool):
                await self._close_segments()
                self._card(call_id, tool, mount_new=True).started(event.title)
            case ToolEnded(call_id=call_id, tool=tool):
                card = self._card(call_id, tool, mount_new=True)
                card.ended(event.status, event.seconds, event.preview)
            case TurnReset():
                for widget in self._call_widgets:
                    if isinstance(widget, ToolCard):
                        self.cards.pop(widget.call_id, None)
                    await widget.remove()
                self._call_widgets = []
                self._text = None
                self._thinking = None
            case ModelReplied():
                await self._close_segments()
                self._call_widgets = []
            case TurnEnded(status=status):
                await self._close_segments()
                self._call_widgets = []
                if status == "stopped":
                    await self.note("Turn stopped.")
                elif status == "failed":
                    await self.note(f"Turn failed: {event.error or 'unknown error'}", error=True)

    def card_for(self, call_id: str, tool: str) -> ToolCard:
        """The card of call `call_id` (a new one, shown at the bottom, when there is none)."""
        return self._card(call_id, tool, mount_new=True)

    def _card(self, call_id: str, tool: str, *, mount_new: bool) -> ToolCard:
        card = self.cards.get(call_id)
        if card is None:
            card = ToolCard(call_id, tool, session=self.session)
            self.cards[call_id] = card
            self._call_widgets.append(card)
            if mount_new:
                self.mount(card)
        return card

    async def _close_segments(self) -> None:
        """The streaming text and thinking are complete: render what is buffered."""
        text, self._text = self._text, None
        thinking, self._thinking = self._thinking, None
        if text is not None:
            await text.finish()
        if thinking is not None:
            thinking.finish()

    @property
    def streaming_text(self) -> str:
        """The text of the segment now streaming ('' when none)."""
        return self._text.text if self._text is not None else ""


def _typed_text(stored: StoredMessage) -> str:
    """What the user typed: its text blocks (the time note is a context block)."""
    texts = [block.text for block in stored.message.blocks if isinstance(block, TextBlock)]
    return "\n".join(t for t in texts if t.strip())


def _title(arguments: object) -> str:
    if isinstance(arguments, dict):
        for key in ("command", "path", "url", "pattern"):
            if isinstance(arguments.get(key), str):
                return str(arguments[key])[:200]
    return ""
