"""The delegate toolset: `delegate` hands a self-contained task to a sub-agent (spec 000
"Delegation").

It is network risk (the child's answer is outside content, so the call taints the turn, as
fetch does). The call's id (tool_use_id) and turn name the child, so a resumed parent that
repeats the call reattaches to it. A bad request (unknown agent, toolsets not a subset of
the parent's, a bad schema, a worktree outside git) is an error result, never a failed turn.
"""

from __future__ import annotations

from typing import Any, ClassVar

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput

from .delegation_types import ChildReport, DelegationAccess, SubturnSpec


class Delegate(Tool):
    name: ClassVar[str] = "delegate"
    description: ClassVar[str] = (
        "Hand a self-contained task to a sub-agent (another configured agent, or a fresh "
        "copy of you) and get its report: status, reply, and its partial output if it did "
        "not finish. The sub-agent sees only `task`, so include everything it needs. "
        "Several delegate calls in one response run in parallel. Options: agent, model "
        "(provider/model), toolsets (a subset of yours), output_schema (a JSON Schema its "
        "answer must match: you get just the JSON), worktree (work in a new git worktree "
        "of your workspace's repository; the report names its branch), background (return "
        "the job id at once; its report arrives later as a message)."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "minLength": 1, "maxLength": 100_000},
            "agent": {"type": "string", "minLength": 1, "maxLength": 128},
            "model": {"type": "string", "minLength": 1, "maxLength": 200},
            "toolsets": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
            "output_schema": {"type": "object"},
            "worktree": {"type": "boolean"},
            "background": {"type": "boolean"},
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    risk: ClassVar[Risk] = Risk.NETWORK

    def __init__(self, delegation: DelegationAccess | None) -> None:
        self.delegation = delegation

    def title(self, args: dict[str, Any]) -> str:
        who = args.get("agent") or "a copy of itself"
        return f"{who}: {str(args.get('task', ''))[:180]}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        delegation = self.delegation
        if delegation is None:
            raise ToolError("delegate: no sub-agents run here")
        toolsets = args.get("toolsets")
        spec = SubturnSpec(
            task=str(args["task"]),
            agent=str(args.get("agent") or ctx.agent),
            parent_session=ctx.session,
            parent_turn=ctx.turn,
            call_id=ctx.call_id,
            model=args.get("model"),
            toolsets=tuple(toolsets) if toolsets is not None else None,
            output_schema=args.get("output_schema"),
            worktree=bool(args.get("worktree", False)),
            background=bool(args.get("background", False)),
        )
        try:
            report = await delegation.delegate(spec, stopped_by_user=ctx.stopped_by_user)
        except HabakkukError as exc:
            raise ToolError(f"delegate: {exc}") from None
        if spec.background and not report.finished:
            return ToolOutput(
                f"Started sub-agent {report.agent} in the background: job {report.job} "
                f"({report.status}). Its report will arrive as a message when it ends."
            )
        return _output(report)


def _output(report: ChildReport) -> ToolOutput:
    from .delegation import format_report

    return ToolOutput(format_report(report), is_error=report.status != "done")


def delegate_tools(delegation: DelegationAccess | None) -> list[Tool]:
    """The delegate toolset, on `delegation`. A sub-agent's turn never offers it (the turn
    loop leaves the toolset out), so sub-agents cannot delegate further."""
    return [Delegate(delegation)]
