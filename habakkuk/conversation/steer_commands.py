"""/steer and /btw (spec 000 "Chat commands"): words for the running turn, and a question
asked aside.

`/steer TEXT` queues TEXT as guidance for the conversation's queued or running turn: the
turn reads it after its next batch of tool calls (or as a follow-up turn when it has no
more), engine/agent/guidance.py. With nothing running it is an ordinary message. From
the shell (`habakkuk run --session S "/steer TEXT"`) it steers the session's running turn
(one `habakkuk serve` or a terminal runs); with nothing running there it refuses and says
to send TEXT as the message instead (a command from the shell queues no turn).

`/btw QUESTION` answers in a throwaway session of the same agent seeded with the
conversation as text (services/aside.py), beside the running turn; nothing is added to
the conversation's transcript. The surface shows the answer (`Conversation.ask_aside`):
a chat gets it as a reply through the delivery path, the terminal in its aside panel,
the shell prints it. Registered in `COMMANDS` when the package is imported (see
__init__).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from habakkuk.conversation.commands import Conversation, Reply, command
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.agent.turn_access import TurnsAccess


@command("steer", "guide the running turn (read after its next tool call)", args="TEXT",
         category="Turn")  # fmt: skip
async def _steer(conv: Conversation, rest: str) -> Reply:
    if not rest:
        return Reply(t("steer.usage"), error=True)
    session = await conv.session()
    if session is not None and await conv.services.turns.steer(session.id, rest):
        return Reply(t("steer.queued"))
    if conv.surface == "run":
        return Reply(t("steer.run_idle"), error=True)
    await conv.start_turn(rest)  # nothing running: an ordinary message
    return Reply()


@command("btw", "ask a question aside, answered beside the running turn", args="QUESTION",
         category="Turn")  # fmt: skip
async def _btw(conv: Conversation, rest: str) -> Reply:
    if not rest:
        return Reply(t("btw.usage"), error=True)
    session = await conv.session()
    if session is None:
        return Reply(t("btw.no_session"), error=True)
    return await conv.ask_aside(session, rest)


async def aside_answer(turns: TurnsAccess, turn: str) -> Reply:
    """The aside turn's answer once it ends (where the surface waits for it: the
    terminal, the shell), or why there is none."""
    outcome = await turns.wait_turn(turn)
    if outcome.status == "done":
        return Reply(outcome.reply)
    return Reply(t("btw.failed", error=outcome.error or outcome.status), error=True)
