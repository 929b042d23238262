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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from habakkuk.engine import payloads
from habakkuk.engine.agent.requests import ReplyTo, TurnRequest, reply_to_from
from habakkuk.engine.jobs import JobKind, declare_kind
from habakkuk.engine.payloads import JsonObject, PayloadError

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
    # The delegating turn's reply address (its request's reply_to), so a background
    # child's report reaches the chat the parent answers.
    reply_to: ReplyTo | None = None

    def to_json(self) -> JsonObject:
        return {
            "task": self.task,
            "agent": self.agent,
            "parent_session": self.parent_session,
            "parent_turn": self.parent_turn,
            "call_id": self.call_id,
            "model": self.model,
            "toolsets": list(self.toolsets) if self.toolsets is not None else None,
            "output_schema": self.output_schema,
            "worktree": self.worktree,
            "background": self.background,
            "reply_to": self.reply_to.to_json() if self.reply_to is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SubturnSpec:
        schema = payloads.mapping(data, "output_schema")
        return cls(
            task=payloads.text(data, "task"),
            agent=payloads.text(data, "agent"),
            parent_session=payloads.text(data, "parent_session"),
            parent_turn=payloads.text(data, "parent_turn"),
            call_id=payloads.text(data, "call_id", ""),
            model=payloads.optional_text(data, "model"),
            toolsets=payloads.texts(data, "toolsets"),
            output_schema=dict(schema) if schema is not None else None,
            worktree=payloads.flag(data, "worktree"),
            background=payloads.flag(data, "background"),
            reply_to=reply_to_from(data),
        )


@dataclass(frozen=True)
class DelegateRun:
    """A sub-turn job's payload (kind SUBTURN_KIND): the child's own turn (`turn`, with its
    sub-turn options), the delegate call it came from (`spec`, so a resumed child keeps
    its options and its parent), and for a worktree child the repository it branches
    from (`worktree_of`). Stored flat, as a turn's payload plus "spec" and "worktree_of"
    (the store's queries read "$.spec.parent_session" and "$.spec.background")."""

    turn: TurnRequest
    spec: SubturnSpec
    worktree_of: str | None = None

    @property
    def session(self) -> str:
        """The child's session."""
        return self.turn.session

    def to_json(self) -> JsonObject:
        data = self.turn.to_json()
        if self.worktree_of is not None:
            data["worktree_of"] = self.worktree_of
        data["spec"] = self.spec.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DelegateRun:
        spec = payloads.mapping(data, "spec")
        if spec is None:
            raise PayloadError("spec", "missing")
        try:
            read = SubturnSpec.from_json(spec)
        except PayloadError as exc:
            raise exc.inside("spec") from None
        return cls(
            TurnRequest.from_json(data),
            read,
            payloads.optional_text(data, "worktree_of") or None,
        )


SUBTURNS: JobKind[DelegateRun] = declare_kind(
    JobKind(SUBTURN_KIND, payload=DelegateRun, noun="sub-turn")
)


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
