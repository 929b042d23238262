"""The conversation: messages as they were stored, and the running turn as it streams.

The view is fed two ways: `load` renders a stored transcript (read through the
facade), and `handle` applies bus events of the running turn. Streamed text goes
into a StreamingMarkdown segment per model call; thinking into a ThinkingView;
tool calls into ToolCards keyed by call id; stored images (attached, or a tool's
media) into FileCards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from textual import events
from textual.containers import VerticalScroll
from textual.errors import NoWidget
from textual.widget import AwaitMount, Widget

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
from habakkuk.engine.llm.hosted import describe
from habakkuk.engine.llm.types import (
    ImageBlock,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from habakkuk.engine.toolkit.outcome import stored_outcome
from habakkuk.widgets.composer import Composer
from habakkuk.widgets.file_card import FileCard
from habakkuk.widgets.markdown_stream import StreamingMarkdown, estimate_height
from habakkuk.widgets.markdown_stream.fence import warm_common_lexers
from habakkuk.widgets.markdown_stream.textual_private import anchor_released
from habakkuk.widgets.notice import Notice
from habakkuk.widgets.thinking import ThinkingView
from habakkuk.widgets.tool_card import ToolCard
from habakkuk.widgets.user_message import UserMessage

if TYPE_CHECKING:
    from textual.geometry import Region
    from textual.screen import Screen

    from habakkuk.engine.agent.turn_access import SentFile
    from habakkuk.engine.sessions import StoredMessage

# How much of a loaded transcript, from the bottom, is built at once (in screens).
BUILT_SCREENS = 1
# A loaded transcript is shown through a window: a contiguous run of its widgets, mounted;
# the others are kept as makers. The window opens on the last this many widgets, and grows
# by as many at a time at the edge the reader scrolls near (a session of 1,000 messages
# would otherwise mount and lay out every one before its last is shown).
MOUNTED_WIDGETS = 30
# How close to an edge of the window (in screens) the reader comes before it grows there.
MOUNT_AHEAD_SCREENS = 2
# The most widgets the window holds once the far end can go: past it, the end away from
# the reader is unmounted (memory and layout stay bounded in a session of 10,000 messages).
WINDOW_LIMIT = 4 * MOUNTED_WIDGETS


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
        # A maker per widget of the loaded transcript (the oldest first); the window of them
        # mounted (items[lo:hi], always the first children: live widgets of a running turn
        # follow them); whether a growth of the window is queued or mounting; how many
        # loads and jumps there were (a growth queued before one is dropped); and the first
        # widget of a jump to the top until it is laid out.
        self._items: list[Callable[[], Widget]] = []
        self._lo = 0
        self._hi = 0
        self._window: list[Widget] = []
        self._busy = False
        self._epoch = 0
        self._home: Widget | None = None

    def on_mount(self) -> None:
        # Before the first stored reply with code is opened (see warm_common_lexers).
        warm_common_lexers()
        self.anchor()
        self.screen.screen_layout_refresh_signal.subscribe(self, self._layout_refreshed)

    def _layout_refreshed(self, screen: Screen[Any]) -> None:
        """Keep what the reader looks at in place when something above it changed height.

        History replies above the visible area have an estimated height until they are
        built (see StreamingMarkdown), and the window grows or drops widgets above it: either
        would move the text being read. The widget at the top of the visible area is noted
        after each layout pass; if its place in the content moved by the next one, the
        scroll position moves by as much. Scrolling moves nothing in the content, so it is
        left alone. Then the window grows at an edge the reader is near, or drops its far end.
        """
        if self._home is not None:
            # A jump to the top waits for the first widgets to be laid out, then goes there.
            if not (self._home.is_attached and self._home.region):
                return
            self._home = None
            self._reading = None
            super().scroll_home(animate=False, immediate=True)
            return
        # When the content moved, this pass's places predate the scroll that follows it:
        # the window changes after the next one.
        if not self._keep_reading(screen):
            self._trim_far_end()
            self._grow_if_near()

    def _keep_reading(self, screen: Screen[Any]) -> bool:
        """Note the widget read, or scroll after it if it moved (then True)."""
        # Textual keeps an anchored view at the bottom itself until the user scrolls away.
        if self.is_anchored and not anchor_released(self):
            self._reading = None
            return False
        # At the top of the conversation nothing above can move what is read. (Right
        # after a jump there, this pass's map may still place the widgets where they were
        # before: a note taken from it would scroll the reader away on the next pass.)
        if self._lo == 0 and self.scroll_y == 0:
            self._reading = None
            return False
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
                return True
        self._reading = None
        shown = self._first_widget_shown(screen, region)
        if shown is not None:
            reading = [(shown, shown.region.y - region.y + offset)]
            while shown.parent is not self and isinstance(shown.parent, Widget):
                shown = shown.parent
            reading.append((shown, shown.region.y - region.y + offset))
            self._reading = reading
        return False

    def _first_widget_shown(self, screen: Screen[Any], region: Region) -> Widget | None:
        """The widget on the highest row of the visible area that shows one of ours.

        Not only the top row: where it falls in the gap between two messages, nothing
        noted meant a batch mounted above then moved the text read by its whole height.
        """
        for row in range(region.y, region.bottom):
            try:
                widget, _ = screen.get_widget_at(region.x + 2, row)
            except NoWidget:
                continue
            if widget is not self and self in widget.ancestors:
                return widget
        return None

    # -- the window on a loaded transcript ---------------------------------------------------

    @property
    def unmounted(self) -> int:
        """How many widgets of the loaded transcript are not mounted (on either side)."""
        return self._lo + len(self._items) - self._hi

    @property
    def window(self) -> tuple[int, int]:
        """Which widgets of the loaded transcript are mounted: (first, past the last)."""
        return self._lo, self._hi

    @property
    def at_end(self) -> bool:
        """Whether the window reaches the transcript's end (live widgets follow it)."""
        return self._hi >= len(self._items)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # Back at the bottom of a window that reaches the end: follow new text again.
        if not self.is_anchored and self.at_end and new_value >= self.max_scroll_y > 0:
            self.anchor()
        self._grow_if_near()

    def _grow_if_near(self) -> None:
        """Queue the next batch of the window at the edge the reader is near."""
        if self._busy or self._home is not None or not self.is_mounted or not self._items:
            return
        # The height it was laid out with (self.size asks the compositor's map, which a
        # layout pass has to build again for every widget).
        height = max(self.container_size.height, 1)
        ahead = MOUNT_AHEAD_SCREENS * height
        if self._lo > 0 and self.scroll_y <= ahead:
            # A reader following the end grows the window when they scroll up (the first
            # paint of an opened session waits for no older widgets), unless there is less
            # than a screen above to scroll through.
            if self.is_anchored and not anchor_released(self) and self.scroll_y >= height:
                return
            up = True
        elif not self.at_end and self.max_scroll_y - self.scroll_y <= ahead:
            up = False
        else:
            return
        self._busy = True
        # After this frame; what is mounted above what is shown is kept in place by
        # _keep_reading.
        self.call_after_refresh(self._grow, up, self._epoch)

    async def _grow(self, up: bool, epoch: int) -> None:
        try:
            # Not when the view was loaded again or jumped since.
            if epoch != self._epoch or not self.is_attached or not self._window:
                return
            if up:
                start = max(self._lo - MOUNTED_WIDGETS, 0)
                widgets = [make() for make in self._items[start : self._lo]]
                self._lo = start
                self._window[0:0] = widgets
                mounting = self.mount_all(widgets, before=0)
            else:
                stop = min(self._hi + MOUNTED_WIDGETS, len(self._items))
                widgets = [make() for make in self._items[self._hi : stop]]
                last = self._window[-1]
                self._hi = stop
                self._window.extend(widgets)
                mounting = self.mount_all(widgets, after=last)
            await mounting
        finally:
            if epoch == self._epoch:
                self._busy = False
        # Whether to grow again is for the next layout pass: until then the reader's place
        # in the grown window is not known.

    def _trim_far_end(self) -> None:
        """Unmount the end of the window away from the reader once it holds too many.

        Only an end more than MOUNT_AHEAD_SCREENS + 1 screens past the visible area goes,
        so the window does not grow back there at once.
        """
        extra = len(self._window) - WINDOW_LIMIT
        if extra <= 0 or self._busy or not self.size.height:
            return
        region = self.content_region
        offset = self.scroll_offset.y
        margin = (MOUNT_AHEAD_SCREENS + 1) * self.size.height

        def top(widget: Widget) -> int | None:
            if not (widget.is_attached and widget.region):
                return None
            return widget.region.y - region.y + offset

        below = top(self._window[-extra])
        above = top(self._window[extra])
        if below is not None and below > self.scroll_y + self.size.height + margin:
            dropped = self._window[-extra:]
            del self._window[-extra:]
            self._hi -= extra
            # Away from the end: new text must not pull the reader down to it.
            self.anchor(False)
        elif above is not None and above < self.scroll_y - margin:
            dropped = self._window[:extra]
            del self._window[:extra]
            self._lo += extra
        else:
            return
        self._forget(dropped)
        self.remove_children(dropped)

    def _forget(self, widgets: list[Widget]) -> None:
        """Stored cards among `widgets` (unmounted) no longer stand for their calls."""
        for widget in widgets:
            if isinstance(widget, ToolCard) and self.cards.get(widget.call_id) is widget:
                del self.cards[widget.call_id]

    def _jump(self, lo: int, hi: int) -> AwaitMount | None:
        """Show items[lo:hi] in place of the window (a growth queued before is dropped)."""
        self._epoch += 1
        self._busy = False
        self._reading = None
        old = self._window
        widgets = [make() for make in self._items[lo:hi]]
        self._lo, self._hi, self._window = lo, hi, widgets
        if not widgets:
            return None
        # Where the old window was: before the live widgets that follow it.
        mounting = self.mount_all(widgets, before=old[0]) if old else self.mount_all(widgets)
        if old:
            self._forget(old)
            self.remove_children(old)
        return mounting

    def scroll_home(self, *args: Any, **kwargs: Any) -> None:
        """The top of the conversation: the window jumps to the first widgets, which are
        shown once laid out (see _layout_refreshed)."""
        if self._lo == 0:
            super().scroll_home(*args, **kwargs)
            return
        self.anchor(False)
        self._jump(0, min(MOUNTED_WIDGETS, len(self._items)))
        self._home = self._window[0]

    def action_scroll_end(self) -> None:
        """End (and Ctrl+End from the composer): the conversation's last message."""
        self.show_end()

    def show_end(self) -> AwaitMount | None:
        """Follow the end of the conversation, the window jumping there if it is away."""
        mounting = None
        if not self.at_end:
            self._home = None
            mounting = self._jump(max(len(self._items) - MOUNTED_WIDGETS, 0), len(self._items))
            self._build_bottom(self._window)
        self.anchor()
        return mounting

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
            self.show_end()

    # -- history ---------------------------------------------------------------------------

    async def load(self, session: str, messages: list[StoredMessage]) -> None:
        """Show a stored transcript (replaces what is shown)."""
        # Before the first await: a growth of the last transcript queued now is dropped.
        self._items = []
        self._lo = self._hi = 0
        self._window = []
        self._busy = False
        self._epoch += 1
        self._home = None
        await self.remove_children()
        self.session = session
        self.cards = {}
        self._text = None
        self._thinking = None
        self._call_widgets = []
        self._items = self._makers(session, messages)
        # Only the bottom is made and mounted now; older widgets when scrolled near.
        self._lo = max(len(self._items) - MOUNTED_WIDGETS, 0)
        self._hi = len(self._items)
        widgets = [make() for make in self._items[self._lo :]]
        self._window = widgets
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
                for image in _images(stored):
                    makers.append(partial(FileCard, image.blob, image.name, image.media_type))
                continue
            for block in message.blocks:
                if isinstance(block, ThinkingBlock) and block.text:
                    makers.append(partial(ThinkingView, block.text, collapsed=True))
                elif isinstance(block, TextBlock) and block.text.strip():
                    makers.append(partial(StreamingMarkdown, block.text))
                elif isinstance(block, ToolUseBlock):
                    makers.append(partial(self._stored_card, session, block, outcomes))
                elif isinstance(block, OpaqueBlock) and describe(block):
                    # The provider's hosted web search or fetch, as its placeholder.
                    makers.append(partial(Notice, describe(block)))
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
        """Show what the user just sent (the view goes to the end for it).

        A reply streaming now keeps its widget (see `note`): the message goes after it and
        the reply's rest still goes into it.
        """
        await self._to_end()
        await self.mount(UserMessage(text))
        self.anchor()

    async def note(self, text: str, *, error: bool = False, follow: bool = True) -> None:
        """A one-line note in the conversation: the answer to something the user did goes
        to the end (`follow`); another moves no reader scrolled away from the end.

        A reply streaming now is not ended by it: the note goes after the reply, whose
        rest still streams into the same widget (closing it here split the reply in two
        around a command answered mid-stream).
        """
        if follow:
            await self._to_end()
        await self.mount(Notice(text, error=error))
        if follow:
            self.anchor()

    async def add_sent_files(self, files: Sequence[SentFile]) -> None:
        """Show the files the user just sent: a card for each one attached, a note for
        each one left out (over the size cap, unreadable)."""
        await self._to_end()
        for file in files:
            if file.note:
                await self.mount(Notice(f"Not attached: {file.note}", error=True))
            else:
                await self.mount(FileCard(file.path, file.name, file.media_type))
        self.anchor()

    async def add_files(self, messages: list[StoredMessage]) -> None:
        """Show the images of a turn's tool results (a tool showed or made them) as cards."""
        cards = [
            FileCard(image.blob, image.name, image.media_type)
            for stored in messages
            if stored.message.role == "user" and stored.message.tool_results
            for image in _images(stored)
        ]
        if cards:
            await self.mount_all(cards)

    async def _to_end(self) -> None:
        """The window at the transcript's end, so what is mounted below it follows it."""
        if not self.at_end:
            mounting = self.show_end()
            if mounting is not None:
                await mounting

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
                    await self.note("Turn stopped.", follow=False)
                elif status == "failed":
                    error = event.error or "unknown error"
                    await self.note(f"Turn failed: {error}", error=True, follow=False)

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


def _images(stored: StoredMessage) -> list[ImageBlock]:
    """The images of a message that are stored as files (attached, or a tool's media)."""
    return [b for b in stored.message.blocks if isinstance(b, ImageBlock) and b.blob]


def _title(arguments: object) -> str:
    if isinstance(arguments, dict):
        for key in ("command", "path", "url", "pattern"):
            if isinstance(arguments.get(key), str):
                return str(arguments[key])[:200]
    return ""
