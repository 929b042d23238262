"""What happened to a call, as tool.end's status: ok, error, denied, interrupted, not run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalRequest
from habakkuk.engine.toolkit.outcome import stored_outcome
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import ToolContext, ToolOutput, ToolRegistry
from tests.engine.test_permissions_matrix import Answering, Probe, make_ctx, queued


class Blocking(Probe):
    """A probe whose run waits until it is cancelled."""

    def __init__(self) -> None:
        super().__init__("slow", Risk.EXEC)
        self.running = asyncio.Event()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.running.set()
        await asyncio.Event().wait()
        return ToolOutput("never")


class Waiting(Answering):
    """An approver that never answers (a human who has not looked yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _ended(registry: ToolRegistry, ctx: ToolContext, tool: str) -> dict[str, Any]:
    with ctx.bus.subscribe(lambda e: e.kind == "tool.end") as ends:
        result = await registry.call(ToolUseBlock("call_1", tool, {}), ctx, {tool})
        data = dict(queued(ends).data)
    data["stored"] = stored_outcome(result.text, result.is_error)
    return data


@pytest.mark.parametrize(
    ("mode", "approver", "status"),
    [
        ("full", None, "ok"),
        ("read-only", None, "denied"),
        ("ask", None, "denied"),  # nobody to ask: denied by policy
        ("ask", Answering("deny"), "denied"),
        ("ask", Answering("allow_once"), "ok"),
    ],
)
async def test_the_end_of_a_call_says_whether_it_ran_or_was_denied(
    tmp_path: Path, mode: str, approver: Any, status: str
) -> None:
    registry = ToolRegistry()
    registry.register(Probe("probe", Risk.EXEC))
    data = await _ended(registry, make_ctx(tmp_path, mode, approver), "probe")
    assert data["status"] == status
    # The stored result reads back as the same outcome.
    assert data["stored"] == status


async def test_a_refused_call_is_denied_and_a_failed_one_is_an_error(tmp_path: Path) -> None:
    class Refusing(Probe):
        def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
            return "not this one"

    class Failing(Probe):
        async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            return ToolOutput("exit status 2", is_error=True)

    registry = ToolRegistry()
    registry.register(Refusing("refusing", Risk.READ))
    registry.register(Failing("failing", Risk.READ))
    ctx = make_ctx(tmp_path, "full")
    refused = await _ended(registry, ctx, "refusing")
    failed = await _ended(registry, ctx, "failing")
    assert (refused["status"], refused["stored"]) == ("denied", "denied")
    assert (failed["status"], failed["stored"]) == ("error", "error")


async def test_a_call_stopped_while_it_waits_for_approval_did_not_run(tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register(Probe("probe", Risk.EXEC))
    approver = Waiting()
    ctx = make_ctx(tmp_path, "ask", approver)
    with ctx.bus.subscribe(lambda e: e.kind == "tool.end") as ends:
        task = asyncio.create_task(
            registry.call(ToolUseBlock("call_1", "probe", {}), ctx, {"probe"})
        )
        await approver.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        data = queued(ends).data
    assert data["status"] == "not_run" and data["seconds"] is None
    assert "call_1" not in ctx.ran


async def test_a_call_stopped_while_it_runs_was_interrupted(tmp_path: Path) -> None:
    registry = ToolRegistry()
    tool = Blocking()
    registry.register(tool)
    ctx = make_ctx(tmp_path, "full")
    with ctx.bus.subscribe(lambda e: e.kind == "tool.end") as ends:
        task = asyncio.create_task(registry.call(ToolUseBlock("call_1", "slow", {}), ctx, {"slow"}))
        await tool.running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        data = queued(ends).data
    assert data["status"] == "interrupted" and isinstance(data["seconds"], float)
    assert "call_1" in ctx.ran
