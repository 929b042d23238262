"""The editors' turn kind, and the folder an editor session works in.

An editor's turn is an ordinary turn request queued under a kind of its own, pinned to the
`habakkuk acp` process that queued it: it streams to that process's connection and asks
that editor's permissions, so no other worker may claim it (they claim only their own
kinds). Its session's origin records the editor's folder, `acp:<cwd>`, which is also the
workspace its frozen prompt names and every one of its turns works in.
"""

from __future__ import annotations

from habakkuk.engine.agent.requests import TurnRequest
from habakkuk.engine.jobs import JobKind, declare_kind

ACP_TURN_KIND = "acp_turn"
ACP_TURNS: JobKind[TurnRequest] = declare_kind(
    JobKind(ACP_TURN_KIND, payload=TurnRequest, noun="editor turn")
)
ORIGIN_PREFIX = "acp:"


def origin_for(cwd: str) -> str:
    """The origin of a session an editor opened in folder `cwd`."""
    return ORIGIN_PREFIX + cwd


def workspace_of(origin: str) -> str | None:
    """The editor folder of a session with `origin`; None for a session no editor opened."""
    if not origin.startswith(ORIGIN_PREFIX):
        return None
    return origin[len(ORIGIN_PREFIX) :] or None
