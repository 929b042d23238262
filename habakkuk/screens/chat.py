"""The chat screen (home): the conversation, the composer, approvals and the status line."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from habakkuk.conversation.answers import answer_word
from habakkuk.conversation.commands import summaries
from habakkuk.engine.events import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalWithdrawn,
    EventPayload,
    QuestionAnswered,
    QuestionAsked,
    QuestionWithdrawn,
)
from habakkuk.engine.goals import progress
from habakkuk.engine.i18n import t
from habakkuk.screens.base import RuntimeScreen, on_bus
from habakkuk.screens.bus_messages import (
    ApprovalArrived,
    BusEvent,
    CompactedArrived,
    DelegateEndedArrived,
    DelegateStartedArrived,
    GoalChangedArrived,
    JobFinishedArrived,
    ModelRepliedArrived,
    QuestionArrived,
    SessionRenamedArrived,
    ToolCallStreamedArrived,
    ToolEndedArrived,
    ToolStartedArrived,
    TurnEndedArrived,
    TurnResetArrived,
    TurnStartedArrived,
    TurnTextArrived,
    TurnThinkingArrived,
)
from habakkuk.screens.chat_conversation import TerminalConversation
from habakkuk.screens.chat_voice import hear_message
from habakkuk.screens.dropped import regular_file, split_dropped
from habakkuk.screens.sections import section_keys
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.aside_panel import AsidePanel
from habakkuk.widgets.child_progress import ChildProgress
from habakkuk.widgets.composer import Composer
from habakkuk.widgets.footer import KeyFooter
from habakkuk.widgets.markdown_stream.textual_private import draw_updates_promptly
from habakkuk.widgets.message_view import MessageView
from habakkuk.widgets.question_prompt import QuestionPrompt
from habakkuk.widgets.status_line import Status, StatusLine

if TYPE_CHECKING:
    from textual.worker import Worker

    from habakkuk.widgets.tool_card import ToolCard

KEYS_HELP = (
    "Keys: Enter send · Ctrl+J newline · Up/Down history · "
    "PgUp/PgDn scroll the chat · Ctrl+Home/Ctrl+End (Home/End when empty) top/bottom · "
    "Ctrl+C stop, or copy a selection (twice quits) · Ctrl+N new · F4 speak a message · "
    f"{section_keys()} · Ctrl+P palette (every key and action) · Ctrl+Q quit"
)


class ChatScreen(RuntimeScreen):
    """Talk to an agent: streamed replies, tool cards, one-key approvals."""

    BINDINGS = [
        Binding("ctrl+n", "new_session", "New", id="chat.new"),
        Binding("ctrl+g", "focus_approval", "Approve", id="chat.approve"),
        Binding("f4", "push_to_talk", "Talk", id="chat.talk", show=False),
        # Shown only while a turn runs (check_action): the composer's text goes as /steer.
        Binding("f2", "steer", "Steer", id="chat.steer"),
        Binding("escape", "close_aside", "Close aside", id="chat.close_aside"),
    ]

    class TurnSent(Message):
        """A message typed here was queued as turn `turn` of session `session`."""

        def __init__(self, session: str, turn: str) -> None:
            super().__init__()
            self.session = session
            self.turn = turn

    class TurnFinished(Message):
        """Turn `turn` of the session shown ended with `status` (done, stopped, failed...)."""

        def __init__(self, session: str, turn: str, status: str) -> None:
            super().__init__()
            self.session = session
            self.turn = turn
            self.status = status

    def __init__(self) -> None:
        super().__init__(id="chat")
        self.session_id = ""
        self.session_title = ""
        self.agent_name = ""
        self.running_turn: str | None = None
        self.queued_turns: list[str] = []
        self._seen_turns: set[str] = set()
        self._compact_jobs: set[str] = set()  # /compact jobs: their outcome is noted at the end
        self._approval_cards: dict[str, ToolCard] = {}  # waiting approval id -> its call's card
        # Delegated children of the shown session still running: child session -> the
        # progress under its delegate call's card (their events are followed as ours).
        self._children: dict[str, ChildProgress] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = None
        self.session_model = ""
        self.session_thinking = ""  # /think's choice for this session ("" = the agent's)
        self.goal_progress = ""  # the session's running /goal on the status line
        self._status = StatusLine()
        self._view = MessageView()
        self._prompt = ApprovalPrompt()
        self._question = QuestionPrompt()
        self._hint = Static("", id="hint")
        self._hint_names: list[str] = []
        self._composer = Composer()
        self._aside = AsidePanel()
        self._listening: asyncio.Event | None = None  # set to stop the push-to-talk key

    def compose(self) -> ComposeResult:
        yield self._status
        yield self._aside
        yield self._view
        yield self._prompt
        yield self._question
        yield self._hint
        yield self._composer
        yield KeyFooter()

    def on_mount(self) -> None:
        # A key typed while a streamed reply is laid out is drawn as soon as an update is due.
        draw_updates_promptly(self)
        self._composer.cursor_blink = self.happ.motion
        self._hint.display = False
        self._composer.focus()

    def on_screen_resume(self) -> None:
        if self.focused is None:
            self._composer.focus()

    def runtime_ready(self) -> None:
        self.agent_name = self.runtime.config.agent(None).name
        self._refresh_status()
        for request in self.runtime.approvals.pending:
            if request.session == self.session_id:
                self._prompt.add(request)
        self._load_questions()

    def _load_questions(self) -> None:
        self._question.clear()
        for request in self.runtime.approvals.questions:
            if request.session == self.session_id:
                self._question.add(request)

    # -- sessions ------------------------------------------------------------------------

    def open_session(self, session_id: str) -> Worker[None]:
        """Show a stored session and continue it (a turn left running resumes here)."""
        return self._open(session_id)

    @work(exclusive=True, group="open")
    async def _open(self, session_id: str) -> None:
        from habakkuk.engine.errors import HabakkukError

        try:
            session = await self.runtime.sessions.session(session_id)
            messages = await self.runtime.sessions.messages(session_id)
            active = await self.runtime.sessions.active_turns(session_id)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.session_id = session.id
        self.session_title = session.title
        self.agent_name = session.agent
        self.input_tokens = self.output_tokens = 0
        self.cost = None
        self.session_model = str(await self.runtime.settings.session_model(session.id) or "")
        level, chosen = await self.runtime.settings.session_thinking(session.id)
        self.session_thinking = level if chosen else ""
        self._load_usage()
        self.goal_progress = progress(await self.runtime.goals.current(session.id))
        self.running_turn = next((j.id for j in active if j.status == "running"), None)
        self.queued_turns = [j.id for j in active if j.status == "queued"]
        self._children = {}
        await self._view.load(session.id, messages)
        self._prompt.clear()
        for request in self.runtime.approvals.pending:
            if request.session == session.id:
                self._prompt.add(request)
        self._load_questions()
        self._refresh_status()
        self._composer.focus()

    def action_new_session(self) -> None:
        """Start over in a fresh session (created when the first message is sent)."""
        self._new_session()

    @work(exclusive=True, group="open")
    async def _new_session(self) -> None:
        self.session_id = ""
        self.session_title = ""
        self.agent_name = self.runtime.config.agent(None).name
        self.running_turn = None
        self.queued_turns = []
        self.input_tokens = self.output_tokens = 0
        self.cost = None
        self.session_model = ""
        self.session_thinking = ""
        self.goal_progress = ""
        self._children = {}
        await self._view.clear()
        self._prompt.clear()
        self._question.clear()
        self._refresh_status()
        self._composer.focus()

    # -- sending ---------------------------------------------------------------------------

    def on_composer_submitted(self, message: Composer.Submitted) -> None:
        question = self._question.current
        # While the agent waits on a question, the next message is its answer.
        if (
            question is not None
            and not message.text.startswith("/")
            and self.runtime.approvals.answer_question(question.id, message.text)
        ):
            self._question.withdraw(question.id)
            self.run_worker(self._view.note(f"Answered: {message.text}"), group="note")
            return
        approval = self._prompt.current
        word = answer_word(message.text) if approval is not None else None
        if approval is not None and word is not None:
            # "yes" typed while an approval waits answers it, as it does in a chat.
            self.run_worker(self._prompt.action_answer(word), group="answer")
            return
        # A file dropped on the terminal arrives as its pasted path (which starts with "/",
        # like a command): the paths that name files are the message's attachments.
        dropped = split_dropped(message.text, regular_file)
        if dropped.paths:
            self._send(dropped.text, dropped.paths)
        elif message.text.startswith("/"):
            self._command(message.text)
        else:
            self._send(message.text)

    @work(group="send")
    async def _send(self, text: str, paths: tuple[str, ...] = ()) -> None:
        if not self.session_id:
            session = await self.runtime.sessions.new_session(
                self.agent_name or None, origin="tui", chat=True
            )
            self.session_id = session.id
            self._view.session = session.id
            first = text.strip().splitlines()[0] if text.strip() else ""
            self.session_title = (first or ", ".join(p.rsplit("/", 1)[-1] for p in paths))[:80]
        if text.strip():
            await self._view.add_user(text)
        if paths:
            sent = await self.runtime.turns.submit_files(
                self.session_id, text, paths, attended=True, here=True
            )
            await self._view.add_sent_files(sent.files)
            turn = sent.turn
        else:
            # Run here: this chat streams it and answers its approvals (another node
            # sharing the database could claim it, and nobody would see it run).
            turn = await self.runtime.turns.submit(self.session_id, text, attended=True, here=True)
        self._queued(turn)
        self.post_message(self.TurnSent(self.session_id, turn))

    def action_push_to_talk(self) -> None:
        """F4: listen for one message and send what was said; F4 again stops listening."""
        if self._listening is not None:
            self._listening.set()
        else:
            self._listening = asyncio.Event()
            self._hear(self._listening)

    @work(exclusive=True, group="voice")
    async def _hear(self, stop: asyncio.Event) -> None:
        try:
            text = await hear_message(self.runtime.voice, stop, self._view.note)
        finally:
            self._listening = None
        if text:
            self._send(text)

    def _queued(self, job: str) -> None:
        """A turn (or /compact) of this session was queued: count it until it starts."""
        if job != self.running_turn and job not in self.queued_turns:
            self.queued_turns.append(job)
        self._refresh_status()

    def stop_turn(self) -> bool:
        """Stop the running turn (or else the newest queued one); False when there is none."""
        turn = self.running_turn or (self.queued_turns[-1] if self.queued_turns else None)
        if turn is None:
            return False
        self.run_worker(self.runtime.turns.stop_turn(turn), group="stop")
        return True

    # -- events ------------------------------------------------------------------------------

    @on_bus(ApprovalArrived)
    def _approval_event(self, message: ApprovalArrived) -> None:
        event = message.event
        match event:
            case ApprovalAsked(request=request) if request.session == self.session_id:
                self._prompt.add(request)
                self._prompt.focus()
                card = self._view.cards.get(request.call_id)
                if card is not None:
                    self._approval_cards[event.id] = card
                    card.awaiting_approval(True)
            case ApprovalAnswered() | ApprovalWithdrawn():
                card = self._approval_cards.pop(event.id, None)
                if card is not None:
                    card.awaiting_approval(False)
                had_focus = self.focused is self._prompt
                self._prompt.withdraw(event.id)
                if had_focus and self._prompt.current is None:
                    self._composer.focus()
        self.refresh_bindings()

    @on_bus(QuestionArrived)
    def _question_event(self, message: QuestionArrived) -> None:
        match message.event:
            case QuestionAsked(request=request):
                if request.session == self.session_id:
                    self._question.add(request)
                    self._composer.focus()
            case QuestionAnswered(id=question) | QuestionWithdrawn(id=question):
                self._question.withdraw(question)

    def _ours(self, event: EventPayload) -> bool:
        return bool(self.session_id) and event.session == self.session_id

    @on_bus(CompactedArrived)
    async def _compacted(self, message: CompactedArrived) -> None:
        event = message.event
        if self._ours(event) and event.turn not in self._compact_jobs:
            # A turn compacted on its own (/compact shows its outcome when it ends).
            await self._view.note(
                f"Context compacted: about {event.tokens_before:,} → "
                f"{event.tokens_after:,} tokens "
                f"({event.dropped} older messages summarized)."
            )

    def _child(self, event: EventPayload) -> ChildProgress | None:
        """The progress of the shown session's child whose session `event` is in."""
        return self._children.get(event.session) if event.session else None

    def _fed_to_child(self, event: EventPayload) -> bool:
        """Show `event` in its child's progress, when it is one of a followed child."""
        child = self._child(event)
        if child is not None:
            child.feed(event)
        return child is not None

    @on_bus(DelegateStartedArrived)
    def _delegate_started(self, message: DelegateStartedArrived) -> None:
        event = message.event
        if not self._ours(event) or event.child_session in self._children:
            return  # another session's child, or a reattach to one already followed
        progress = ChildProgress(
            job=event.job,
            child_session=event.child_session,
            agent=event.agent,
            task=event.task,
            background=event.background,
            started_at=event.at,
        )
        self._children[event.child_session] = progress
        self._view.card_for(event.call_id, "delegate").attach(progress)

    @on_bus(DelegateEndedArrived)
    def _delegate_ended(self, message: DelegateEndedArrived) -> None:
        event = message.event
        if self._ours(event):
            progress = self._children.pop(event.child_session, None)
            if progress is not None:
                progress.end(event.status, event.seconds)

    @on_bus(SessionRenamedArrived)
    def _renamed(self, message: SessionRenamedArrived) -> None:
        # The background title after the first turn (or a rename elsewhere).
        if self._ours(message.event):
            self.session_title = message.event.title
            self._refresh_status()

    @on_bus(TurnStartedArrived)
    def _turn_started(self, message: TurnStartedArrived) -> None:
        event = message.event
        if self._fed_to_child(event) or not self._ours(event):
            return
        if event.compact:
            self._compact_jobs.add(event.turn)
        self._seen_turns.add(event.turn)
        self.running_turn = event.turn
        if event.turn in self.queued_turns:
            self.queued_turns.remove(event.turn)
        self._refresh_status()

    @on_bus(
        TurnTextArrived,
        TurnThinkingArrived,
        ToolCallStreamedArrived,
        TurnResetArrived,
        ToolStartedArrived,
        ToolEndedArrived,
    )
    async def _turn_progress(self, message: BusEvent[Any]) -> None:
        if not self._fed_to_child(message.event) and self._ours(message.event):
            await self._view.handle(message.event)

    @on_bus(ModelRepliedArrived)
    async def _model_replied(self, message: ModelRepliedArrived) -> None:
        if self._ours(message.event):
            await self._view.handle(message.event)
            self._load_usage()

    @on_bus(TurnEndedArrived)
    async def _turn_ended(self, message: TurnEndedArrived) -> None:
        event = message.event
        if self._fed_to_child(event) or not self._ours(event):
            return
        await self._view.handle(event)
        if event.turn in self._seen_turns:
            self._show_turn_files(event.session, event.turn)
        self.post_message(self.TurnFinished(self.session_id, event.turn, event.status))
        if self.running_turn == event.turn:
            self.running_turn = None
        self._load_usage()
        if event.turn not in self._seen_turns:
            # A turn that was already under way when the session opened (resumed after a
            # restart): part of it streamed before we listened, so show the transcript as
            # committed.
            self._open(self.session_id)

    @work(group="turn-files")
    async def _show_turn_files(self, session: str, turn: str) -> None:
        """Images the turn's tools showed or made, as cards (read from its committed
        messages through the facade: the bus carries no files)."""
        from habakkuk.engine.errors import HabakkukError

        try:
            messages = await self.runtime.sessions.turn_messages(session, turn)
        except HabakkukError:
            return
        if session == self.session_id:
            await self._view.add_files(messages)

    @on_bus(GoalChangedArrived)
    async def _goal_changed(self, message: GoalChangedArrived) -> None:
        event = message.event
        if not self._ours(event):
            return
        running = event.status == "running"
        self.goal_progress = (
            t("goal.status", counted=event.counted, budget=event.budget) if running else ""
        )
        self._refresh_status()
        if event.notice:  # how it ended (a chat's turn gets it as a message instead)
            await self._view.note(event.notice)

    @on_bus(JobFinishedArrived)
    def _job_finished(self, message: JobFinishedArrived) -> None:
        event = message.event
        if not self._ours(event):
            return
        if event.job == self.running_turn:
            self.running_turn = None
        if event.job in self.queued_turns:
            self.queued_turns.remove(event.job)
        self._refresh_status()

    def on_approval_prompt_answered(self, message: ApprovalPrompt.Answered) -> None:
        if message.answer is None or self._prompt.current is None:
            self._composer.focus()
        self.refresh_bindings()

    def action_focus_approval(self) -> None:
        """Go to the waiting approval (after Esc put it off)."""
        if self._prompt.current is not None:
            self._prompt.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_approval":
            return self._prompt.current is not None
        if action == "steer":
            return self.running_turn is not None
        if action == "close_aside":
            return self._aside.shown
        return True

    def action_steer(self) -> None:
        """F2 while a turn runs: send the composer's text as /steer, not as a queued turn."""
        text = self._composer.text.strip()
        if text:
            self._composer.clear()
            self._command(f"/steer {text}")

    def action_close_aside(self) -> None:
        """Esc: close /btw's aside panel."""
        self._aside.close()
        self.refresh_bindings()

    # -- status and hints ----------------------------------------------------------------

    @work(exclusive=True, group="usage")
    async def _load_usage(self) -> None:
        """Tokens and dollars of this session, from the usage records."""
        if not self.session_id or not self.has_runtime:
            # Also when the app closed the runtime while this was queued.
            return
        session = self.session_id
        totals = await self.runtime.ledger.usage_totals(session=session)
        if session != self.session_id:
            return
        self.input_tokens = sum(t.input_tokens + t.cache_read_tokens for t in totals)
        self.output_tokens = sum(t.output_tokens for t in totals)
        priced = any(t.calls > t.unpriced_calls for t in totals)
        self.cost = sum(t.cost for t in totals) if priced else None
        self._refresh_status()

    def _refresh_status(self) -> None:
        if not self.has_runtime:
            return
        config = self.runtime.config
        try:
            agent = config.agent(self.agent_name or None)
        except Exception:
            self._status.show(Status(agent=self.agent_name, session=self.session_title))
            return
        self._status.show(
            Status(
                agent=agent.name,
                model=self.session_model or (str(agent.chain[0]) if agent.chain else agent.model),
                session=self.session_title,
                mode=agent.mode,
                thinking=self.session_thinking or agent.thinking,
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cost=self.cost,
                running=self.running_turn is not None,
                queued=len(self.queued_turns),
                goal=self.goal_progress,
            )
        )
        self.refresh_bindings()  # the steer key shows only while a turn runs

    def on_composer_scroll_chat(self, message: Composer.ScrollChat) -> None:
        self._view.page(message.where)

    def on_composer_completions(self, message: Composer.Completions) -> None:
        self._hint_names = message.names
        self._show_hint()

    def on_resize(self, event: events.Resize) -> None:
        if self._hint_names:
            self._show_hint()

    def _show_hint(self) -> None:
        if not self._hint_names:
            self._hint.display = False
            return
        # The hint's padding (app.tcss) is two cells on each side.
        self._hint.update(completion_hint(self._hint_names, max(self.size.width - 4, 20)))
        self._hint.display = True

    # -- slash commands ------------------------------------------------------------------

    @work(group="command")
    async def _command(self, text: str) -> None:
        """Run a chat command (habakkuk.conversation) and note its reply."""
        from habakkuk.conversation.commands import dispatch, parse, plain

        reply = await dispatch(text, TerminalConversation(self))
        if reply is None:
            return
        if self.session_id:
            # /model, /think and /title change what the status line shows.
            session = await self.runtime.sessions.session(self.session_id)
            self.session_title = session.title or self.session_title
            self.session_model = str(await self.runtime.settings.session_model(session.id) or "")
            level, chosen = await self.runtime.settings.session_thinking(session.id)
            self.session_thinking = level if chosen else ""
            self._refresh_status()
        if reply.text:
            keys = f"\n{KEYS_HELP}" if parse(text) == ("help", "") else ""
            await self._view.note(plain(reply.text) + keys, error=reply.error)

    def run_command(self, text: str, *, complete: bool = False) -> None:
        """Run a chat command (the palette); with `complete`, leave it in the composer
        for its arguments."""
        if complete:
            self._composer.clear()
            self._composer.insert(text + " ")
            self._composer.focus()
            return
        self._command(text)

    # -- what the commands do here (screens/chat_conversation.py) --------------------------

    def adopt_session(self, session_id: str) -> None:
        """Continue in `session_id`, created just now for this conversation."""
        self.session_id = session_id
        self._view.session = session_id

    def start_fresh(self) -> Worker[None]:
        """Start over: a fresh session when the next message is sent."""
        return self._new_session()

    def send_text(self, text: str) -> None:
        """Send `text` as the user's next message."""
        self._send(text)

    def queued(self, job: str) -> None:
        """A job of this session (a /compact) was queued."""
        self._queued(job)

    def refresh_status(self) -> None:
        """Show the agent, model and counts again."""
        self._refresh_status()

    def show_aside(self, question: str, answer: str) -> None:
        """Show /btw's answer in the aside panel (Esc closes it)."""

        async def _show() -> None:
            await self._aside.show(question, answer)
            self.refresh_bindings()

        self.run_worker(_show(), group="aside")


HINT_SEPARATOR = " · "  # narrow, so every command and the Tab hint fit four lines at 80
HINT_TAIL = "   Tab completes"
HINT_LINES = 4  # the hint's max-height in app.tcss


def completion_hint(names: list[str], width: int) -> Content:
    """The matching slash commands in at most HINT_LINES lines of `width` cells.

    With one or two matches each says what it does. Commands that do not fit are
    counted at the end ("… 3 more": typing more of the name narrows the list).
    """
    summary = summaries("terminal")
    items = [name + (f" {summary[name]}" if len(names) <= 2 else "") for name in names]
    lines: list[list[str]] = [[]]
    used = 0
    left_out = 0
    for index, item in enumerate(items):
        cells = len(item) + (len(HINT_SEPARATOR) if lines[-1] else 0)
        if lines[-1] and used + cells > width:
            if len(lines) == HINT_LINES:
                left_out = len(items) - index
                break
            lines.append([])
            used, cells = 0, len(item)
        lines[-1].append(item)
        used += cells
    tail = f"   … {left_out} more" if left_out else HINT_TAIL
    while left_out and lines[-1] and used + len(tail) > width:
        # Make room for the count on the last line.
        dropped = lines[-1].pop()
        used -= len(dropped) + (len(HINT_SEPARATOR) if lines[-1] else 0)
        left_out += 1
        tail = f"   … {left_out} more"
    parts: list[Content | tuple[str, str] | str] = []
    for number, line in enumerate(lines):
        if number:
            parts.append("\n")
        for index, item in enumerate(line):
            if index:
                parts.append((HINT_SEPARATOR, "dim"))
            name, _, about = item.partition(" ")
            parts.append((name, "bold"))
            if about:
                parts.append((f" {about}", "dim"))
    if used + len(tail) <= width:
        parts.append((tail, "dim italic"))
    elif len(lines) < HINT_LINES:
        parts.append(("\n" + tail.strip(), "dim italic"))
    return Content.assemble(*parts)
