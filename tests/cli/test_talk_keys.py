"""Approvals at the keyboard while `habakkuk talk` runs: the request printed, a typed line
answering it through the approvals service."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest

from habakkuk.cli.talk_keys import LineReader, answer_approvals, read_answer
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import eventually

EXEC = """
- text: "Running it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-output"}
- after: {ok: "It ran.", denied: "It was refused."}
  text: "?"
"""


@pytest.mark.parametrize(
    ("line", "answer"),
    [("y\n", "allow_once"), ("A", "allow_session"), ("n", "deny"), ("yes!", "allow_once")],
)
def test_keys_and_words_answer(line: str, answer: str) -> None:
    assert read_answer(line) == answer


def test_other_lines_are_not_answers() -> None:
    assert read_answer("what?") is None


@pytest.mark.parametrize(
    ("typed", "reply"), [("maybe\ny\n", "It ran."), ("n\n", "It was refused.")]
)
async def test_a_typed_line_answers_the_turns_approval(
    runtime_factory: OpenRuntime, typed: str, reply: str
) -> None:
    runtime = await runtime_factory(mock_config(EXEC, mode="ask"))
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session(None, origin="cli")
    read_end, write_end = os.pipe()
    lines: list[str] = []
    with os.fdopen(read_end) as keyboard, runtime.approvals.attach():
        reader = LineReader(keyboard)
        assert reader.open()
        answering = asyncio.create_task(
            answer_approvals(runtime.bus, runtime.approvals, session.id, reader, lines.append)
        )
        try:
            turn = await runtime.turns.submit(session.id, "run it", attended=True, here=True)
            await eventually(lambda: lines, what="the approval to be asked")
            assert lines[0].startswith("? exec: ") and "[y]es, [a]lways, [n]o" in lines[0]
            os.write(write_end, typed.encode())
            outcome = await runtime.turns.wait_turn(turn)
        finally:
            answering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answering
            reader.close()
            os.close(write_end)
    assert outcome.reply.endswith(reply)
    assert ("? y, a or n" in lines) == typed.startswith("maybe")


async def test_lines_written_together_come_one_by_one_then_the_end() -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as keyboard:
        reader = LineReader(keyboard)
        assert reader.open()
        os.write(write_end, b"maybe\ny\npart")
        os.close(write_end)
        got = [await reader.line() for _ in range(5)]
        reader.close()
    assert got == ["maybe\n", "y\n", "part\n", "", ""]
