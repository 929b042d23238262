"""The terminal's conversation as the chat commands see it (habakkuk.conversation).

The chat screen's session is the conversation's: /new and /agent start a
fresh one, a fork opens in the screen, and /compact's outcome is noted when its
job ends.
"""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Protocol

from habakkuk.conversation.commands import Reply, Services, Surface

if TYPE_CHECKING:
    from textual.worker import Worker

    from habakkuk.engine.sessions import Session
    from habakkuk.screens.backend import TerminalBackend


class ChatView(Protocol):
    """What the conversation uses of the chat screen (habakkuk.screens.chat.ChatScreen),
    so this module does not import the screen that imports it."""

    session_id: str
    agent_name: str

    @property
    def runtime(self) -> TerminalBackend:
        """The open runtime."""
        ...

    def adopt_session(self, session_id: str) -> None:
        """Continue in `session_id`, created just now for this conversation."""

    def start_fresh(self) -> Worker[None]:
        """Start over: a fresh session when the next message is sent."""
        ...

    def open_session(self, session_id: str) -> Worker[None]:
        """Show a stored session and continue it."""
        ...

    def send_text(self, text: str) -> None:
        """Send `text` as the user's next message."""

    def queued(self, job: str) -> None:
        """A job of this session (a /compact) was queued."""

    def refresh_status(self) -> None:
        """Show the agent, model and counts again."""

    def show_aside(self, question: str, answer: str) -> None:
        """Show /btw's answer in the aside panel."""


class TerminalConversation:
    """The chat screen's conversation."""

    surface: Surface = "terminal"

    def __init__(self, screen: ChatView):
        self.screen = screen
        self.services: Services = screen.runtime

    async def session(self, *, create: bool = False) -> Session | None:
        screen = self.screen
        if screen.session_id:
            return await screen.runtime.sessions.session(screen.session_id)
        if not create:
            return None
        session = await screen.runtime.sessions.new_session(
            screen.agent_name or None, origin="tui", chat=True
        )
        screen.adopt_session(session.id)
        return session

    async def agent(self) -> str:
        return self.screen.agent_name or self.default_agent()

    def default_agent(self) -> str:
        return self.screen.runtime.config.agent(None).name

    async def start_fresh(self, agent: str | None = None) -> None:
        keep = await self.agent() if agent is None else (agent or self.default_agent())
        await self.screen.start_fresh().wait()
        self.screen.agent_name = keep
        # Started now, as a chat's /new starts it: /status and /title see it at once.
        session = await self.screen.runtime.sessions.new_session(keep, origin="tui", chat=True)
        self.screen.adopt_session(session.id)
        self.screen.refresh_status()

    async def continue_in(self, session: Session) -> None:
        await self.screen.open_session(session.id).wait()

    async def start_turn(self, text: str) -> str | None:
        self.screen.send_text(text)
        return None

    async def compact(self, session_id: str) -> Reply:
        """Queued as a turn of the session; its outcome is the reply."""
        runtime = self.screen.runtime
        job = await runtime.turns.compact_session(session_id, here=True)  # shown running here
        self.screen.queued(job)
        outcome = await runtime.turns.wait_turn(job)
        if outcome.status == "done":
            return Reply(outcome.reply)
        if outcome.status == "cancelled":
            return Reply("/compact: stopped before it ran.")
        return Reply(f"/compact failed: {outcome.error or outcome.status}", error=True)

    async def ask_aside(self, session: Session, question: str) -> Reply:
        """Run the aside turn here; its answer shows in the aside panel (Esc closes)."""
        from habakkuk.conversation.steer_commands import aside_answer

        turns = self.screen.runtime.turns
        answer = await aside_answer(turns, await turns.ask_aside(session.id, question, here=True))
        if answer.error:
            return answer
        self.screen.show_aside(question, answer.text)
        return Reply()

    async def send_file(self, data: bytes, name: str, caption: str) -> bool:
        return False  # the terminal writes exports to a file instead

    def about(self) -> list[str]:
        return [f"**You** {getpass.getuser()} (this terminal)", "**Allowed by** local"]

    async def state(self) -> str | None:
        return None
