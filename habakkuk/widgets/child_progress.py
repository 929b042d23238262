"""A delegated child's progress under its delegate call's card, live.

The chat screen creates one per DelegateStarted of the shown session and feeds it the
child session's own turn events. It shows the child's agent and status line (running,
the tool it is calling, done / failed / stopped / timed out, elapsed), its tool calls as
short lines and the tail of its streaming text; when the child ends it folds into one
summary line.

Events arrive one by one (a streamed reply is many small pieces), so feeding only
changes the state and marks what changed; the lines are redrawn at most once per screen
refresh, and only the part that changed (the status, the tool lines or the text tail).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from habakkuk.engine.events import (
    EventPayload,
    ToolCallStreamed,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnReset,
    TurnStarted,
    TurnText,
)
from habakkuk.engine.i18n import t
from habakkuk.widgets.tool_card import STATUS_MARKS
from habakkuk.work.delegation_types import TERMINAL

if TYPE_CHECKING:
    from textual.timer import Timer

TOOL_LINES = 4  # the child's last few tool calls
TEXT_LINES = 3  # the last few lines of its streaming text
TEXT_KEEP = 4000  # characters of streamed text kept (enough for TEXT_LINES long lines)
LINE_CELLS = 200  # a shown line is cut here (the widget's width cuts it further)
FAILED = tuple(s for s in TERMINAL if s != "done")


class ChildProgress(Widget):
    """One delegated child (session `child_session`) of a delegate call."""

    DEFAULT_CSS = """
    ChildProgress { height: auto; padding: 0 0 0 2; color: $text-muted; }
    ChildProgress > Static { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    ChildProgress > .child-text { text-style: italic; }
    ChildProgress.-ended > .child-tools { display: none; }
    ChildProgress.-ended > .child-text { display: none; }
    ChildProgress.-failed > .child-status { color: $error; }
    """

    def __init__(
        self,
        *,
        job: str,
        child_session: str,
        agent: str,
        task: str,
        background: bool = False,
        started_at: float | None = None,
    ) -> None:
        super().__init__(classes="child-progress")
        self.job = job
        self.child_session = child_session
        self.agent = agent
        self.child_task = task
        self.background = background
        self.status = "queued"  # queued, running, calling, then a ChildStatus of TERMINAL
        self.calling = ""  # the tool it is calling now
        self.tool_count = 0
        self.started_at = started_at if started_at is not None else time.time()
        self.last_at = self.started_at
        self.seconds: float | None = None  # set when it ends
        self._tools: dict[str, tuple[str, str, str]] = {}  # call id -> (tool, status, title)
        self._calls: set[str] = set()  # every call id seen (for the count)
        self.turn_status = ""  # how the child's turn ended, before the delegate's end
        self.folded = False
        self._text = ""
        self._dirty: set[str] = set()
        self._flush_pending = False
        self._tick: Timer | None = None
        self._status_line = Static(classes="child-status")
        self._tools_lines = Static(classes="child-tools")
        self._text_tail = Static(classes="child-text")

    def compose(self) -> ComposeResult:
        yield self._status_line
        yield self._tools_lines
        yield self._text_tail

    def on_mount(self) -> None:
        self._dirty.update(("status", "tools", "text"))
        self._flush()
        if getattr(self.app, "motion", True):
            # The elapsed time moves on between events (not in deterministic test frames).
            self._tick = self.set_interval(1.0, self._tick_elapsed)

    @property
    def ended(self) -> bool:
        """The delegate reported the child's end (the line is folded)."""
        return self.folded

    # -- what the chat feeds it -------------------------------------------------------------

    def feed(self, event: EventPayload) -> None:
        """Apply one event of the child session's turn."""
        if self.ended:
            return
        self.last_at = max(self.last_at, event.at)
        match event:
            case TurnStarted():
                # Also a retried child's next attempt.
                self.turn_status = ""
                self._set_status("running")
            case TurnText(text=text):
                self._text = (self._text + text)[-TEXT_KEEP:]
                self._mark("text")
                if self.status == "queued":
                    self._set_status("running")
            case TurnReset():
                self._text = ""
                self._mark("text")
            case ToolCallStreamed(call_id=call_id, tool=tool):
                self._call(call_id, tool, "pending", "")
            case ToolStarted(call_id=call_id, tool=tool):
                self._call(call_id, tool, "running", event.title)
            case ToolEnded(call_id=call_id, tool=tool):
                title = self._tools.get(call_id, (tool, "", ""))[2]
                self._call(call_id, tool, event.status, title)
            case TurnEnded(status=status):
                # The child's own turn ended; DelegateEnded (`end`) folds the line.
                self.turn_status = status
                self._set_status(status)
            case _:
                return
        self._mark("status")

    def end(self, status: str, seconds: float | None) -> None:
        """DelegateEnded: fold into one summary line."""
        self.status = status if status in TERMINAL else "failed"
        self.calling = ""
        self.seconds = seconds
        self.folded = True
        self.set_class(True, "-ended")
        self.set_class(self.status in FAILED, "-failed")
        if self._tick is not None:
            self._tick.stop()
        self._mark("status")

    # -- drawing ------------------------------------------------------------------------------

    def _call(self, call_id: str, tool: str, status: str, title: str) -> None:
        if call_id not in self._calls:
            self._calls.add(call_id)
            self.tool_count += 1
            self._tools[call_id] = (tool, status, title)
            while len(self._tools) > TOOL_LINES:
                del self._tools[next(iter(self._tools))]
        elif call_id in self._tools:
            self._tools[call_id] = (tool, status, title)  # keeps its place in the order
        busy = [t for t, s, _ in self._tools.values() if s in ("pending", "running", "waiting")]
        self.calling = busy[-1] if busy else ""
        if self.turn_status == "":
            self._set_status("calling" if busy else "running")
        self._mark("tools")

    def _set_status(self, status: str) -> None:
        self.status = status
        self._mark("status")

    def _mark(self, part: str) -> None:
        self._dirty.add(part)
        if not self._flush_pending and self.is_mounted:
            self._flush_pending = True
            self.call_after_refresh(self._flush)

    def _tick_elapsed(self) -> None:
        if not self.ended:
            self.last_at = max(self.last_at, time.time())
            self._mark("status")

    def _flush(self) -> None:
        self._flush_pending = False
        dirty, self._dirty = self._dirty, set()
        if "status" in dirty:
            self._status_line.update(self.status_content())
        if "tools" in dirty:
            self._tools_lines.update(self.tools_content())
        if "text" in dirty:
            self._text_tail.update(Content(self.text_tail()))

    def elapsed(self) -> float:
        """Seconds since the child was announced (its total once ended)."""
        if self.seconds is not None:
            return self.seconds
        return max(self.last_at - self.started_at, 0.0)

    def status_words(self) -> str:
        """How the child is doing, in words."""
        if self.status == "calling" and self.calling:
            return f"calling {self.calling}"
        return self.status

    def status_content(self) -> Content:
        """The status line (the whole child, in one line, once it ended)."""
        parts: list[Content | tuple[str, str] | str] = [
            ("↳ ", "dim"),
            (self.agent, "bold"),
            "  ",
            (self.status_words(), "bold" if self.ended else ""),
            (f"  {self.elapsed():.1f}s", "dim"),
        ]
        if self.background:
            parts.append(("  " + t("tui.child.background"), "dim"))
        if self.ended:
            calls = t("tui.child.tool_calls", count=self.tool_count)
            parts.append((f"  {calls}", "dim"))
        return Content.assemble(*parts)

    def tools_content(self) -> Content:
        """The child's last few tool calls, one short line each."""
        lines: list[Content | tuple[str, str] | str] = []
        hidden = self.tool_count - len(self._tools)
        if hidden > 0:
            lines.append((f"… {hidden} earlier", "dim"))
        for tool, status, title in self._tools.values():
            if lines:
                lines.append("\n")
            line = f"{STATUS_MARKS.get(status, '?')} {tool}"
            if title.strip():
                line += "  " + title.strip().splitlines()[0]
            lines.append(line[:LINE_CELLS])
        return Content.assemble(*lines)

    def text_tail(self) -> str:
        """The last few non-empty lines of what the child is writing."""
        lines = [line for line in self._text.splitlines() if line.strip()]
        return "\n".join(line[:LINE_CELLS] for line in lines[-TEXT_LINES:])
