"""Tool.confirm, the awaited form of confirm_reason (a tool that must look before it can
tell, as the computer asks its desktop which app is in front): a call only a human may
allow, in every mode. Neither a reviewer nor a grant "for the session" stands in for the
human; a mode that denies the call still denies it; an unattended run denies it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.approvals import Answer, ApprovalDecision, ApprovalRequest
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput, ToolRegistry
from habakkuk.engine.toolkit.reviewer import ReviewerApprover
from tests.helpers import tool_context


class Guarded(Tool):
    """Runs unasked in full mode, except on the "bank" app, which needs a person."""

    name = "guarded"
    description = "test tool"
    input_schema = {"type": "object", "properties": {"app": {"type": "string"}}}
    risk = Risk.EXEC

    def __init__(self) -> None:
        self.runs = 0

    async def confirm(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return "the bank app is in front" if args.get("app") == "bank" else ""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.runs += 1
        return ToolOutput("done")


class Person:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision(self.answer, by="dashboard")


class AllowingReviewer:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def review(self, request: ApprovalRequest) -> Any:
        self.asked.append(request)
        raise AssertionError("the reviewer was asked about a call only a human may allow")


async def call(tools: ToolRegistry, ctx: ToolContext, app: str, n: int = 1) -> str:
    result = await tools.call(ToolUseBlock(f"c{n}", "guarded", {"app": app}), ctx, {"guarded"})
    return ("error: " if result.is_error else "") + result.text


def setup() -> tuple[ToolRegistry, Guarded]:
    tool, tools = Guarded(), ToolRegistry()
    tools.register(tool)
    return tools, tool


async def test_full_mode_asks_a_person_every_time_and_a_session_grant_does_not_stand_in(
    tmp_path: Path,
) -> None:
    tools, tool = setup()
    person = Person("allow_session")
    ctx = tool_context(tmp_path, mode="full", approver=person)
    assert await call(tools, ctx, "editor") == "done"
    assert person.asked == []  # nothing to confirm: full mode runs it unasked
    assert await call(tools, ctx, "bank", 2) == "done"
    assert await call(tools, ctx, "bank", 3) == "done"
    assert len(person.asked) == 2
    assert "(the bank app is in front)" in person.asked[0].summary
    assert tool.runs == 3


async def test_a_person_saying_no_and_an_unattended_run_deny_it(tmp_path: Path) -> None:
    tools, tool = setup()
    no = await call(tools, tool_context(tmp_path, mode="full", approver=Person("deny")), "bank")
    assert no == "error: denied by dashboard"
    alone = await call(tools, tool_context(tmp_path, mode="full"), "bank")
    assert alone.startswith("error: denied by policy") and "nobody can approve" in alone
    assert tool.runs == 0


async def test_a_reviewer_is_never_asked_and_cannot_allow_it(tmp_path: Path) -> None:
    tools, tool = setup()
    reviewer = AllowingReviewer()
    alone = ReviewerApprover(reviewer, None)  # type: ignore[arg-type]  # a stand-in reviewer
    denied = await call(tools, tool_context(tmp_path, mode="full", approver=alone), "bank")
    assert denied.startswith("error: denied by policy") and "nobody can approve" in denied
    person = Person("allow_once")
    then_human = ReviewerApprover(reviewer, person)  # type: ignore[arg-type]  # likewise
    allowed = await call(tools, tool_context(tmp_path, mode="full", approver=then_human), "bank")
    assert allowed == "done" and len(person.asked) == 1 and reviewer.asked == []
    assert tool.runs == 1


async def test_a_mode_that_denies_the_call_denies_it_before_any_confirmation(
    tmp_path: Path,
) -> None:
    tools, tool = setup()
    person = Person("allow_once")
    ctx = tool_context(tmp_path, mode="read-only", approver=person)
    assert (
        await call(tools, ctx, "bank") == "error: denied: guarded is not allowed in read-only mode"
    )
    assert person.asked == [] and tool.runs == 0
