"""`habakkuk chat --plain`: a line-mode chat for a dumb terminal, a pipe or a screen reader.

One process: the runtime and its workers run here, each message is a turn run here and
followed on the events bus (the reply streamed, every state change a line: plain_view).
Standard input is read a line at a time, in order, whatever it is (a terminal, a pipe,
a file), and each line is one of:

- the answer to the approval or clarify question waiting (y, a, n or a chat's yes/no word;
  any text for a question), when one waits;
- while a turn runs and nothing waits: held until the turn ends, so a piped script's
  lines come one after the other (`/stop`, `/steer TEXT` and `/btw QUESTION` act at once,
  even while an approval or a question waits: they are about the running turn);
- otherwise a chat /command (/help lists them; /quit or /exit ends the chat) or a message.

The end of input ends the chat once the running turn is over (an approval still waiting
then is denied, a question answered as unanswerable), exit 0. Ctrl-C stops the running
turn (like /stop); a second one, or one at the prompt, quits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.cli.common import current_home, open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK

if TYPE_CHECKING:
    from habakkuk.cli.plain_view import PlainView
    from habakkuk.conversation.plain import PlainConversation
    from habakkuk.engine.agent.turn_access import TurnOutcome
    from habakkuk.engine.events import EventPayload, Subscription
    from habakkuk.engine.toolkit.approvals import ApprovalRequest
    from habakkuk.runtime import Runtime
    from habakkuk.tools.clarify import ClarifyRequest

# The bus queue of the chat: big enough that a long streamed reply is never thinned out.
EVENTS = 100_000
STOP = "/stop"
# The commands about the running turn: they act at once, even while it runs or waits for an
# answer (any other line waits its turn).
ABOUT_THE_TURN = frozenset({STOP, "/steer", "/btw"})


def about_the_turn(text: str) -> bool:
    """Whether the line `text` is /stop, /steer TEXT or /btw QUESTION."""
    words = text.split(maxsplit=1)
    return bool(words) and words[0] in ABOUT_THE_TURN


class Input(Protocol):
    """Lines of standard input, in order; "" at the end of input."""

    async def line(self) -> str: ...

    def close(self) -> None: ...


class ReadAhead:
    """Input that cannot be watched for readiness (a regular file, /dev/null): it is all
    there already, so it is read at once."""

    def __init__(self, text: str) -> None:
        self._lines = deque(text.splitlines(keepends=True))

    async def line(self) -> str:
        return self._lines.popleft() if self._lines else ""

    def close(self) -> None:
        self._lines.clear()


def open_input(stream: Any = None) -> Input:
    """Standard input as lines read when the loop sees them ready (a terminal, a pipe)."""
    from habakkuk.cli.talk_keys import LineReader

    stream = sys.stdin if stream is None else stream
    reader = LineReader(stream)
    if reader.open():
        return reader
    return ReadAhead(stream.read())


def main(args: argparse.Namespace) -> int:
    """`habakkuk chat --plain [--agent A] [--session S]`."""
    return run_async(chat(args))


async def chat(args: argparse.Namespace) -> int:
    """Open the runtime, the conversation and standard input; run the chat to its end."""
    from habakkuk.cli.plain_view import PlainView
    from habakkuk.conversation.plain import PlainConversation
    from habakkuk.engine.errors import BadInput
    from habakkuk.engine.i18n import set_language

    runtime = await open_runtime(current_home())
    try:
        if runtime.config.language:
            # Else the language `habakkuk` chose for this invocation (the locale's).
            set_language(runtime.config.language)
        agent = runtime.config.agent(args.agent).name if args.agent else None
        if args.session:
            session = await runtime.sessions.session(args.session)  # NotFound: one line, exit 2
            if agent and agent != session.agent:
                raise BadInput(f"session {args.session} belongs to agent {session.agent!r}")
        tty = sys.stdin.isatty() and sys.stdout.isatty()
        view = PlainView(sys.stdout, prompt=tty)
        loop = PlainChat(runtime, view, open_input())
        loop.conv = PlainConversation(
            runtime, agent=agent, session_id=args.session or None, follow=loop.follow
        )
        await runtime.start_mcp()  # MCP tools for the turns (at most 20 s)
        runtime.start_workers(channels=False)  # the chat bots stay with `serve`
        with runtime.approvals.attach(questions=True):
            return await loop.run()
    finally:
        await runtime.close()


class PlainChat:
    """The chat loop: input lines, the bus's events and the followed turns, one at a time."""

    conv: PlainConversation

    def __init__(self, runtime: Runtime, view: PlainView, lines: Input) -> None:
        self.runtime = runtime
        self.view = view
        self.lines = lines
        self._inbox: deque[str] = deque()  # lines read and not yet used ("" = the end)
        self._turns: dict[str, asyncio.Task[TurnOutcome]] = {}  # followed: job -> its wait
        self._watched: set[str] = set()  # the sessions whose events are shown
        self._approvals: dict[str, ApprovalRequest] = {}  # waiting on this chat, in order
        self._questions: dict[str, ClarifyRequest] = {}
        self._streamed: set[str] = set()  # turns whose reply text streamed
        self._shown_end: set[str] = set()  # turns whose end was printed from their event
        self._wake = asyncio.Event()
        self._stopping = False  # Ctrl-C stopped the turns: a second one quits
        self._quit = False
        self._stops: set[asyncio.Future[str | None]] = set()  # Ctrl-C's stop requests

    def follow(self, job: str) -> None:
        """Print `job`'s events (a turn or /compact queued here) and wait for it."""
        if self.conv.session_id:
            self._watched.add(self.conv.session_id)
        self._turns[job] = asyncio.create_task(self.runtime.turns.wait_turn(job))

    async def run(self) -> int:
        """Until /quit, the end of input, or Ctrl-C at the prompt; the exit code."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._interrupt)
        agent = await self.conv.agent()
        self.view.welcome(agent, self.conv.session_id)
        if self.conv.session_id:
            self._watched.add(self.conv.session_id)
        events = self.runtime.bus.subscribe(maxsize=EVENTS)
        reading: asyncio.Future[str] = asyncio.ensure_future(self.lines.line())
        getting: asyncio.Future[EventPayload] = asyncio.ensure_future(events.get())
        waking = asyncio.ensure_future(self._wake.wait())
        try:
            while not self._quit:
                self._drain(events)
                if await self._act():
                    continue
                if self._quit:
                    break
                if not self._turns and not self._approvals and not self._questions:
                    self.view.prompt()
                waits: set[asyncio.Future[Any]] = {reading, getting, waking}
                done, _ = await asyncio.wait(
                    waits | set(self._turns.values()), return_when=asyncio.FIRST_COMPLETED
                )
                if getting in done:
                    self._show(getting.result())
                    getting = asyncio.ensure_future(events.get())
                if reading in done:
                    line = reading.result()
                    self._inbox.append(line)
                    # After the end of input nothing more is read (a future never done).
                    reading = (
                        asyncio.ensure_future(self.lines.line()) if line else loop.create_future()
                    )
                if waking in done:
                    self._wake.clear()
                    waking = asyncio.ensure_future(self._wake.wait())
                self._settle(events)
        finally:
            pending: list[asyncio.Future[Any]] = [reading, getting, waking]
            for task in [*pending, *self._turns.values(), *self._stops]:
                task.cancel()
            events.close()
            self.lines.close()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
        return EXIT_OK

    # -- input -----------------------------------------------------------------------

    async def _act(self) -> bool:
        """Use the next input line if this is its moment; False when it must wait."""
        if not self._inbox:
            return False
        line = self._inbox[0]
        text = line.strip()
        if self._approvals:
            await self._answer_approval(line)
        elif self._questions:
            await self._answer_question(line)
        elif self._turns:
            if not about_the_turn(text):
                return False  # the next message waits for the running turn
            self._inbox.popleft()
            await self._command(text)
        else:
            self._inbox.popleft()
            if not line:
                self._quit = True  # the end of input, nothing running
            elif text.startswith("/") and await self._command(text):
                pass
            elif text:
                await self.conv.start_turn(text)
        return True

    async def _command(self, text: str) -> bool:
        """Run the chat command `text`; False when it is not a command at all."""
        from habakkuk.conversation.commands import dispatch, plain

        reply = await dispatch(text, self.conv)
        if reply is None:
            return False
        if reply.text:
            self.view.line(plain(reply.text))
        self._quit = self._quit or self.conv.ended
        return True

    async def _answer_approval(self, line: str) -> None:
        from habakkuk.cli.talk_keys import read_answer

        approval = next(iter(self._approvals))
        if about_the_turn(line.strip()):
            self._inbox.popleft()
            await self._command(line.strip())
            return
        if line:  # the end of input stays: it ends the chat once the turn is over
            self._inbox.popleft()
        answer = read_answer(line) if line else "deny"  # nobody is left to answer
        if answer is None:
            self.view.approval_again()
            return
        del self._approvals[approval]
        if await self.runtime.approvals.respond(approval, answer, by="terminal"):
            self.view.answered(answer)

    async def _answer_question(self, line: str) -> None:
        from habakkuk.engine.i18n import t

        question = next(iter(self._questions))
        if about_the_turn(line.strip()):
            self._inbox.popleft()
            await self._command(line.strip())
            return
        if line:
            self._inbox.popleft()
        if not line.strip() and line:
            return  # an empty line answers nothing
        del self._questions[question]
        said = line.strip() if line else t("plain.no_answer")
        if self.runtime.approvals.answer_question(question, said):
            self.view.question_answered()

    def _interrupt(self) -> None:
        """Ctrl-C: stop the running turns; at the prompt, or a second time, quit."""
        if not self._turns or self._stopping:
            self._quit = True
        else:
            self._stopping = True
            self.view.stopping()
            for job in self._turns:
                stop = asyncio.ensure_future(self.runtime.turns.stop_turn(job))
                self._stops.add(stop)  # held until done: the loop keeps weak references
                stop.add_done_callback(self._stops.discard)
        self._wake.set()

    # -- events ----------------------------------------------------------------------

    def _drain(self, events: Subscription) -> None:
        """Show every event already published (before a turn's end is told)."""
        while (event := events.get_nowait()) is not None:
            self._show(event)

    def _settle(self, events: Subscription) -> None:
        """Forget the followed turns that finished, telling an end no event told."""
        for job, task in list(self._turns.items()):
            if not task.done():
                continue
            self._drain(events)  # the turn's last events were published before it settled
            del self._turns[job]
            if job in self._shown_end:
                continue
            outcome = None if task.cancelled() or task.exception() else task.result()
            if outcome is None or outcome.status in ("cancelled", "stopped"):
                self.view.stopped()  # stopped before it started: no turn event
            elif outcome.status != "done":
                self.view.failed(outcome.error or outcome.status)
        if not self._turns:
            self._stopping = False

    def _show(self, event: EventPayload) -> None:
        from habakkuk.engine.events import (
            ApprovalAnswered,
            ApprovalAsked,
            ApprovalWithdrawn,
            QuestionAnswered,
            QuestionAsked,
            QuestionWithdrawn,
            ToolEnded,
            ToolStarted,
            TurnEnded,
            TurnReset,
            TurnStarted,
            TurnText,
        )

        match event:
            case ApprovalAsked(request=request) if request.session in self._watched:
                self._approvals[event.id] = request
                self.view.approval(request)
            case ApprovalAnswered(id=approval) | ApprovalWithdrawn(id=approval):
                if self._approvals.pop(approval, None) is not None:
                    self.view.approval_gone()  # answered elsewhere, timed out or stopped
            case QuestionAsked(request=request) if request.session in self._watched:
                self._questions[event.id] = request
                self.view.question(request)
            case QuestionAnswered(id=question) | QuestionWithdrawn(id=question):
                self._questions.pop(question, None)
            case _ if event.session not in self._watched:
                pass
            case TurnStarted(compact=False):
                self.view.thinking()
            case TurnText(text=text):
                self._streamed.add(event.turn)
                self.view.text(text)
            case TurnReset():
                self.view.retrying()
            case ToolStarted(tool=tool, title=title):
                self.view.tool(tool, title)
            case ToolEnded(is_error=True, tool=tool, preview=preview):
                self.view.tool_failed(tool, preview)
            case TurnEnded():
                self._shown_end.add(event.turn)
                self.view.ended(event, streamed=event.turn in self._streamed)
