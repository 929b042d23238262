"""Whatever a tool's input does, the call ends with an error result and the turn goes on."""

from __future__ import annotations

import json
from typing import Any

from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput
from tests.conftest import mock_config

LONG = "d/" * 50_000  # a 100 KB path


def _hostile_calls() -> list[dict[str, Any]]:
    nul = "a\u0000b"
    return [
        {"name": "read_file", "arguments": {"path": nul}},
        {"name": "write_file", "arguments": {"path": nul, "content": "x"}},
        {"name": "edit_file", "arguments": {"path": nul, "old_string": "a", "new_string": "b"}},
        {"name": "list_dir", "arguments": {"path": nul}},
        {"name": "search_files", "arguments": {"pattern": "x", "path": nul}},
        {"name": "exec", "arguments": {"command": "true", "cwd": nul}},
        {
            "name": "apply_patch",
            "arguments": {"patch": f"*** Begin Patch\n*** Add File: {nul}\n+x\n*** End Patch"},
        },
        {"name": "read_file", "arguments": {"path": LONG}},
        {"name": "write_file", "arguments": {"path": LONG, "content": "x"}},
        {"name": "picky", "arguments": {"path": "x"}},
    ]


class Picky(Tool):
    """A tool whose policy hooks themselves trip over the input (a recursion, say)."""

    name = "picky"
    description = "its paths() recurses without end"
    input_schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    risk = Risk.WRITE

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Any]:
        return self.paths(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ran")


def _script(calls: list[dict[str, Any]]) -> str:
    # JSON is YAML: the NUL and the long path travel as they are.
    return json.dumps([{"tool_calls": calls}, {"text": "carried on"}])


async def _run(runtime_factory: Any, mode: str) -> list[Any]:
    runtime = await runtime_factory(mock_config(_script(_hostile_calls()), mode=mode))
    runtime.tools.register(Picky(), "core")
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    outcome = await wait_within(
        runtime.turns.wait_turn(await runtime.turns.submit(session.id, "go")), 60
    )
    assert outcome.status == "done" and outcome.reply == "carried on"
    stored = await runtime.sessions.messages(session.id)
    assert len(stored) == 4  # user, the calls, their results, the answer: no second attempt
    results = stored[2].message.tool_results
    assert [r.tool_use_id for r in results] == [c.tool_use_id for c in stored[1].message.tool_uses]
    return list(results)


async def test_hostile_tool_inputs_end_the_call_with_an_error_not_the_turn(
    runtime_factory: Any,
) -> None:
    for mode in ("workspace", "full"):
        results = await _run(runtime_factory, mode)
        for result in results:
            assert result.is_error, result.text[:200]
            assert "interrupted" not in result.text
        texts = [r.text for r in results]
        assert all("null byte" in t for t in texts[:7]), [t[:120] for t in texts[:7]]
        assert texts[0].startswith("read_file failed: ")
        assert all(len(t) < 1000 for t in texts)
        assert "picky" in texts[-1] and "recursion" in texts[-1]
