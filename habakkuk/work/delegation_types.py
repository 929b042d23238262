"""Delegation's values and the narrow Protocol the delegate tool, /subagents and the
surfaces use (spec 000 "Delegation").

`delegate` hands a self-contained task to a sub-agent (another configured agent or a
fresh copy of the caller). The task becomes a sub-turn job (kind SUBTURN_KIND, run in a
worker pool of its own) in a child session; its id derives from the parent session, the
parent turn and the call, and the options join it only when given, so a parent that
crashed and repeats the call reattaches to the running or finished child.

Every child ends with a terminal status the parent sees (done, failed, stopped, timed
out) and whatever partial output it has; the child's result is stored (its transcript
and its job's result) before the parent is notified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

SUBTURN_KIND = "subturn"
# queued/running while the job lives; then one terminal status.
ChildStatus = Literal["queued", "running", "done", "failed", "stopped", "timed out"]
TERMINAL: tuple[ChildStatus, ...] = ("done", "failed", "stopped", "timed out")
WORKTREES_DIR = ".habakkuk-worktrees"  # <workspace>/.habakkuk-worktrees/<job>
BRANCH_PREFIX = "habakkuk/"  # the child's branch: habakkuk/<job>


@dataclass(frozen=True)
class SubturnSpec:
    """What a sub-turn job carries in its payload, so a resumed child keeps its options."""

    task: str
    agent: str  # the child's agent (the caller's own name for a fresh copy)
    parent_session: str
    parent_turn: str
    call_id: str = ""  # the delegate call's tool_use_id (the terminal's card)
    model: str | None = None  # provider/model, tried before the agent's chain
    toolsets: tuple[str, ...] | None = None  # a subset of the parent's
    output_schema: dict[str, Any] | None = None
    worktree: bool = False
    background: bool = False
    # The delegating turn's reply address (its payload's reply_to), so a background
    # child's report reaches the chat the parent answers.
    reply_to: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChildReport:
    """What a parent (and /subagents) sees of one child."""

    job: str
    agent: str
    session: str  # the child session
    parent_session: str
    task: str
    status: ChildStatus
    # The child's final answer, or its partial output (its last text) when it did not
    # finish; with output_schema, the validated JSON's text.
    reply: str = ""
    error: str = ""  # why it failed, was stopped or timed out
    output: Any = None  # the validated JSON value (output_schema), else None
    # worktree: true: the child's branch, the commit it started from, git diff --stat
    branch: str = ""
    base_commit: str = ""
    diff_stat: str = ""
    started_at: float = 0.0
    ended_at: float | None = None
    background: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


class DelegationAccess(Protocol):
    """Sub-agents of a home, as the delegate tool and /subagents use them."""

    async def delegate(
        self, spec: SubturnSpec, *, stopped_by_user: Callable[[], bool] | None = None
    ) -> ChildReport:
        """Queue (or reattach to) the child. With spec.background, return at once (status
        queued or running, or the stored end of a child that already finished); else wait
        for its terminal status, stopping it after delegation.timeout_seconds ("timed
        out"), or when the wait is cancelled while `stopped_by_user()` says the user
        stopped the parent (a shutdown leaves it running: the resumed parent reattaches).
        HabakkukError for a bad request (unknown agent, toolsets not a subset, a bad
        schema, a worktree outside a git repository)."""
        ...

    async def children(self, parent_session: str, *, active_only: bool = True) -> list[ChildReport]:
        """The session's children (queued or running only, by default), oldest first."""
        ...

    async def stop(self, parent_session: str, job_prefix: str) -> ChildReport:
        """Cancel one of the session's children (an id prefix is enough) and tell the
        parent it was stopped. NotFound; HabakkukError for a prefix naming several."""
        ...
