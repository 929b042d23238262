"""/subagents: the conversation's delegated tasks (spec 000 "Chat commands").

`/subagents` lists the session's children still queued or running with their elapsed time;
`/subagents stop ID` (an id prefix is enough) cancels one and tells the parent in a turn of
its session. Registered in `COMMANDS` when the package is imported (see __init__).
"""

from __future__ import annotations

import time
from typing import cast

from habakkuk.conversation.commands import Conversation, Reply, command
from habakkuk.engine.i18n import t
from habakkuk.work.delegation_types import ChildReport, DelegationAccess


def _delegation(conv: Conversation) -> DelegationAccess | None:
    # Only runtimes that run sub-agents have one (a surface's own services may not).
    found = getattr(conv.services, "delegation", None)
    return cast("DelegationAccess", found) if found is not None else None


def elapsed(seconds: float) -> str:
    """2m05s-style elapsed time."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _line(child: ChildReport, now: float) -> str:
    task = " ".join(child.task.split())[:80]
    mode = t("subagents.background") if child.background else ""
    return (
        f"`{child.job}` **{child.agent}** {child.status}{mode}, "
        f"{elapsed(now - child.started_at)} — {task}"
    )


@command("subagents", "list this conversation's running sub-agents, or stop one",
         args="[stop ID]", category="Turn")  # fmt: skip
async def _subagents(conv: Conversation, rest: str) -> Reply:
    delegation = _delegation(conv)
    if delegation is None:
        return Reply(t("subagents.unavailable"), error=True)
    session = await conv.session()
    if session is None:
        return Reply(t("subagents.no_session"))
    verb, _, target = rest.strip().partition(" ")
    if verb == "stop":
        if not target.strip():
            return Reply(t("subagents.stop_usage"), error=True)
        stopped = await delegation.stop(session.id, target.strip())
        return Reply(
            t("subagents.stopped", job=stopped.job, agent=stopped.agent, status=stopped.status)
        )
    if verb:
        return Reply(t("subagents.usage"), error=True)
    children = await delegation.children(session.id)
    if not children:
        return Reply(t("subagents.none"))
    now = time.time()
    lines = [t("subagents.title", n=len(children))]
    lines.extend(_line(c, now) for c in children)
    return Reply("\n".join(lines))
