"""`habakkuk run "/command"`: a chat command from the shell, against one session.

The conversation is the session given with --session (or none): a command that
needs one says so, a fork is printed rather than followed, and /compact runs
its job here and prints the outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.i18n import t

from .commands import Reply, Services, Surface

if TYPE_CHECKING:
    from habakkuk.engine.sessions import Session


class RunServices(Services, Protocol):
    """The runtime as `habakkuk run` uses it for a command: the commands' services, and
    its workers (to run a /compact here)."""

    def start_workers(self, *, channels: bool = True, maintenance: bool = False) -> None: ...


class RunConversation:
    """One session (or none yet) as a command from the shell sees it."""

    surface: Surface = "run"

    def __init__(self, services: RunServices, session_id: str | None, agent: str | None):
        self.services: RunServices = services
        self.session_id = session_id
        self.agent_name = agent

    async def session(self, *, create: bool = False) -> Session | None:
        if self.session_id:
            return await self.services.sessions.session(self.session_id)
        if not create:
            return None
        session = await self.services.sessions.new_session(self.agent_name, origin="cli")
        self.session_id = session.id
        return session

    async def agent(self) -> str:
        if self.session_id:
            return (await self.services.sessions.session(self.session_id)).agent
        return self.default_agent()

    def default_agent(self) -> str:
        return self.services.config.agent(self.agent_name).name

    async def start_fresh(self, agent: str | None = None) -> None:
        session = await self.services.sessions.new_session(agent or self.agent_name, origin="cli")
        self.session_id = session.id

    async def continue_in(self, session: Session) -> None:
        self.session_id = session.id  # printed: the shell continues with --session

    async def start_turn(self, text: str) -> str | None:
        """Queue `text` as a turn run by this process (/goal's first turn: /retry and
        /queue are for interactive surfaces, not declared for run)."""
        session = await self.session(create=True)
        assert session is not None
        self.services.start_workers(channels=False)
        return await self.services.turns.submit(session.id, text, here=True)

    async def compact(self, session_id: str) -> Reply:
        self.services.start_workers(channels=False)
        outcome = await self.services.turns.wait_turn(
            await self.services.turns.compact_session(session_id)
        )
        if outcome.status == "done":
            return Reply(outcome.reply)
        return Reply(t("run.compact_failed", error=outcome.error or outcome.status), error=True)

    async def send_file(self, data: bytes, name: str, caption: str) -> bool:
        return False  # written to a file instead

    async def ask_aside(self, session: Session, question: str) -> Reply:
        """Run the aside turn here and print its answer."""
        from .steer_commands import aside_answer

        self.services.start_workers(channels=False)
        turns = self.services.turns
        return await aside_answer(turns, await turns.ask_aside(session.id, question))

    def about(self) -> list[str]:
        return [t("run.about")]

    async def state(self) -> str | None:
        return None
