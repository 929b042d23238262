"""The composer: multi-line input, Enter sends, history, slash-command completion."""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from habakkuk.engine.i18n import t
from habakkuk.widgets.markdown_stream.textual_private import own_bindings


def completions(text: str) -> list[str]:
    """Slash commands that start with `text` (only while the first word is typed)."""
    if not text.startswith("/") or any(c.isspace() for c in text):
        return []
    from habakkuk.conversation.commands import summaries

    return [name for name in summaries("terminal") if name.startswith(text)]


class Composer(TextArea):
    """Where the user writes. Enter sends; Ctrl+J (or Shift+Enter) starts a new line.

    Up at the very start and Down at the very end walk through what was sent
    before; Tab completes a slash command. PageUp and PageDown scroll the chat;
    Ctrl+Home and Ctrl+End (or Home and End in an empty composer) jump to its top
    and bottom.

    Every key the composer binds is applied here, in the order it arrived. Textual
    runs a widget's own bindings only once the key has bubbled up to the app, by
    which time the keys typed after it were already inserted: `one` Ctrl+J `two`
    came out as `onetwo` and a blank line.
    """

    DEFAULT_CSS = """
    Composer { height: auto; min-height: 3; max-height: 8; border: tall $primary 40%; }
    Composer:focus { border: tall $primary; }
    """
    BINDINGS = [
        Binding("ctrl+j,shift+enter", "newline", "Newline", id="composer.newline", show=False),
        Binding("tab", "complete", "Complete", show=False, id="composer.complete"),
        Binding("pageup", "scroll_chat('page_up')", "Scroll up", show=False, id="composer.page_up"),
        Binding(
            "pagedown",
            "scroll_chat('page_down')",
            "Scroll down",
            show=False,
            id="composer.page_down",
        ),
        Binding("ctrl+home", "scroll_chat('top')", "Top", show=False, id="composer.top"),
        Binding("ctrl+end", "scroll_chat('bottom')", "Bottom", show=False, id="composer.bottom"),
        Binding("home", "home", "Line start", show=False, id="composer.home"),
        Binding("end", "end", "Line end", show=False, id="composer.end"),
    ]

    class Submitted(Message):
        """The user pressed Enter on non-empty text."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class ScrollChat(Message):
        """Scroll the conversation: page_up, page_down, top or bottom."""

        def __init__(self, where: str) -> None:
            super().__init__()
            self.where = where

    class Completions(Message):
        """The slash commands matching what is typed (empty: hide the hint)."""

        def __init__(self, names: list[str]) -> None:
            super().__init__()
            self.names = names

    def __init__(self, *, blink: bool = True) -> None:
        super().__init__(
            "",
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            placeholder=t("tui.composer.placeholder"),
            id="composer",
        )
        self.cursor_blink = blink
        self.sent: list[str] = []
        self._history_index: int | None = None
        self._draft = ""
        self._last_completions: list[str] = []

    async def on_key(self, event: events.Key) -> None:
        """Enter sends; a key the composer binds runs its action now.

        Any other key goes on to `TextArea`'s own key handler, which Textual calls after
        this one (handlers run down the class hierarchy unless the default is prevented).
        """
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self._submit()
            return
        for binding in own_bindings(self, event.key):
            if binding.priority:
                continue  # the app ran those before the key reached us
            # Run it now, before the next key is read (see the class docstring).
            if await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()
                return

    def _submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._history_index = None
        self._draft = ""
        self.clear()
        self.post_message(self.Submitted(text))

    def action_newline(self) -> None:
        """Insert a line break without sending."""
        self.insert("\n")

    def action_scroll_chat(self, where: str) -> None:
        """Ask the chat to scroll its conversation (the composer keeps the focus)."""
        self.post_message(self.ScrollChat(where))

    def action_home(self) -> None:
        """Home: the start of the line; in an empty composer, the top of the chat."""
        if self.text:
            self.action_cursor_line_start()
        else:
            self.action_scroll_chat("top")

    def action_end(self) -> None:
        """End: the end of the line; in an empty composer, the bottom of the chat."""
        if self.text:
            self.action_cursor_line_end()
        else:
            self.action_scroll_chat("bottom")

    def type_text(self, text: str) -> None:
        """Insert text typed while something else in the chat had the focus, and take it."""
        self.insert(text)
        self.screen.set_focus(self)

    def action_complete(self) -> None:
        """Tab: finish a slash command; otherwise move focus on."""
        names = completions(self.text)
        if not names:
            self.screen.focus_next()
            return
        common = names[0] if len(names) == 1 else _common_prefix(names)
        if len(names) == 1:
            common += " "
        if len(common) > len(self.text):
            self.text = common
            self.move_cursor(self.document.end)

    def action_cursor_up(self, select: bool = False) -> None:
        """At the very first line, Up recalls the previous message sent."""
        if select or self.cursor_location[0] > 0 or not self.sent:
            super().action_cursor_up(select)
            return
        if self._history_index is None:
            self._draft = self.text
            self._history_index = len(self.sent)
        if self._history_index > 0:
            self._history_index -= 1
            self._show(self.sent[self._history_index])

    def action_cursor_down(self, select: bool = False) -> None:
        """At the last line while browsing history, Down goes forward to the draft."""
        last_row = self.document.line_count - 1
        if select or self._history_index is None or self.cursor_location[0] < last_row:
            super().action_cursor_down(select)
            return
        self._history_index += 1
        if self._history_index >= len(self.sent):
            self._history_index = None
            self._show(self._draft)
        else:
            self._show(self.sent[self._history_index])

    def _show(self, text: str) -> None:
        self.text = text
        self.move_cursor(self.document.end)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        names = completions(self.text)
        if names != self._last_completions:
            self._last_completions = names
            self.post_message(self.Completions(names))


def _common_prefix(names: list[str]) -> str:
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    return prefix
