"""The plain chat's conversation (`habakkuk chat --plain`) and its own commands.

A line-mode chat for a dumb terminal, a pipe or a screen reader: the conversation is one
session (created with the first message or command that needs one), its turns run in
this process and are followed by the chat loop (habakkuk/cli/plain_chat.py), which is
handed every job the commands queue (`follow`) so it prints their events and waits for
them. `/quit` and `/exit` end the chat; they are declared for this surface only, so /help
lists them here and nowhere else.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from habakkuk.engine.i18n import t

from .commands import Conversation, Reply, Services, Surface, command

if TYPE_CHECKING:
    from habakkuk.engine.sessions import Session

PLAIN: frozenset[Surface] = frozenset({"plain"})
# Where the plain chat's sessions say they came from (sessions list, overview).
ORIGIN = "cli"


@runtime_checkable
class Ending(Protocol):
    """A conversation that the person can end from inside it (the plain chat)."""

    def end(self) -> None:
        """End the conversation once the command's reply is shown."""


class PlainConversation:
    """One session of the plain chat, as the chat commands see it."""

    surface: Surface = "plain"

    def __init__(
        self,
        services: Services,
        *,
        agent: str | None,
        session_id: str | None,
        follow: Callable[[str], None],
    ) -> None:
        """`follow(job)` is called with each turn or compaction queued here: the chat loop
        prints its events and waits for it."""
        self.services = services
        self.agent_name = agent
        self.session_id = session_id
        self.ended = False
        self._follow = follow

    async def session(self, *, create: bool = False) -> Session | None:
        if self.session_id:
            return await self.services.sessions.session(self.session_id)
        if not create:
            return None
        session = await self.services.sessions.new_session(
            self.agent_name, origin=ORIGIN, chat=True
        )
        self.session_id = session.id
        return session

    async def agent(self) -> str:
        if self.session_id:
            return (await self.services.sessions.session(self.session_id)).agent
        return self.default_agent()

    def default_agent(self) -> str:
        return self.services.config.agent(self.agent_name).name

    async def start_fresh(self, agent: str | None = None) -> None:
        keep = await self.agent() if agent is None else (agent or self.default_agent())
        self.agent_name = keep
        session = await self.services.sessions.new_session(keep, origin=ORIGIN, chat=True)
        self.session_id = session.id

    async def continue_in(self, session: Session) -> None:
        self.session_id = session.id
        self.agent_name = session.agent

    async def start_turn(self, text: str) -> str | None:
        """Queue `text` as a turn run here, attended (its approvals are asked in the chat)."""
        session = await self.session(create=True)
        assert session is not None
        turn = await self.services.turns.submit(session.id, text, attended=True, here=True)
        self._follow(turn)
        return turn

    async def compact(self, session_id: str) -> Reply:
        """Queued and followed like a turn: its outcome is printed when it ends."""
        self._follow(await self.services.turns.compact_session(session_id, here=True))
        return Reply(t("plain.compacting"))

    async def send_file(self, data: bytes, name: str, caption: str) -> bool:
        return False  # written to a file instead (/export prints where)

    async def ask_aside(self, session: Session, question: str) -> Reply:
        """Run the aside turn here (not followed: its events are another session's) and
        print its answer."""
        from .steer_commands import aside_answer

        turns = self.services.turns
        return await aside_answer(turns, await turns.ask_aside(session.id, question, here=True))

    def about(self) -> list[str]:
        return [t("plain.about", user=getpass.getuser()), t("plain.allowed")]

    async def state(self) -> str | None:
        return None

    def end(self) -> None:
        """/quit: the chat loop ends after showing the reply."""
        self.ended = True


def _conversation_check(conv: PlainConversation) -> Conversation:
    return conv  # mypy checks here that PlainConversation is a Conversation


@command("quit", "end the chat (also /exit)", aliases=("exit",), where=PLAIN,
         category="Chat", action="quit")  # fmt: skip
async def _quit(conv: Conversation, rest: str) -> Reply:
    if isinstance(conv, Ending):
        conv.end()
    return Reply(t("plain.bye"))
