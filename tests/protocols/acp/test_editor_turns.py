"""Editor turns are jobs of their own kind: only the `habakkuk acp` pool that queued one
runs it (the home's other workers never claim it), in the editor's folder, and one whose
editor is gone fails at once instead of running unseen."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.protocols.acp.kind import ACP_TURN_KIND, origin_for
from habakkuk.protocols.acp.runs import EditorTurns
from habakkuk.runtime import Runtime
from tests.conftest import OpenRuntime, mock_config

SCRIPT = """
- steps:
    - tool_calls: [{name: list_dir, arguments: {}}]
    - text: "answer: {input}"
"""


class NoEditorFiles:
    """An editor that offers no file system: the ordinary file tools run."""

    def reads(self, session: str) -> bool:
        return False

    def writes(self, session: str) -> bool:
        return False

    async def read_text(self, session: str, path: str) -> str:
        raise AssertionError("never asked")

    async def write_text(self, session: str, path: str, content: str) -> None:
        raise AssertionError("never asked")


@pytest.fixture
async def runtime(runtime_factory: OpenRuntime) -> Runtime:
    """A runtime whose own workers run, as `habakkuk serve` or the app would."""
    opened = await runtime_factory(mock_config(SCRIPT, mode="workspace"))
    opened.start_workers(channels=False)
    return opened


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "only-here.txt").write_text("x", encoding="utf-8")
    return project


def editor_turns(runtime: Runtime, *, live: bool) -> EditorTurns:
    assert runtime.turn_runner is not None
    return EditorTurns(
        runtime.queue,
        runtime.transcripts,
        runtime.turn_runner.deps,
        NoEditorFiles(),
        lambda session: live,
        settled=runtime.job_settled,
    )


@pytest.fixture
async def stopped() -> AsyncIterator[list[EditorTurns]]:
    """Editor pools a test started, stopped after it."""
    started: list[EditorTurns] = []
    yield started
    for turns in started:
        await turns.pool.stop()


async def test_only_the_editor_pool_runs_its_turns_in_the_editors_folder(
    runtime: Runtime, folder: Path, stopped: list[EditorTurns]
) -> None:
    session = await runtime.sessions.new_session(
        "main", origin=origin_for(str(folder)), workspace=folder
    )
    turns = editor_turns(runtime, live=True)
    turn = await turns.submit(session.id, "hello", folder)
    # Every kind the home's workers claim: none of them takes the editor's turn.
    kinds = sorted({k for state in runtime.turns.pool_states() for k in state.name.split(",")})
    assert "turn" in kinds and ACP_TURN_KIND not in kinds
    _, claimed = await runtime.queue.settle_and_claim([], kinds, 10)
    assert [lease.job.id for lease in claimed] == []
    queued = await runtime.queue.get(turn)
    assert queued is not None and queued.kind == ACP_TURN_KIND and queued.status == "queued"

    turns.pool.start()
    stopped.append(turns)
    outcome = await runtime.turns.wait_turn(turn)
    assert (outcome.status, outcome.reply) == ("done", "answer: hello")
    # list_dir with no path listed the editor's folder, not the agent's workspace.
    messages = await runtime.sessions.turn_messages(session.id, turn)
    results = [r.text for m in messages for r in m.message.tool_results]
    assert results and "only-here.txt" in results[0]
    assert str(folder) in session.system_prompt
    # update_plan is offered to editor sessions only: the home's registry has none.
    assert runtime.tools.get("update_plan") is None
    assert turns.runner.deps.tools.get("update_plan") is not None


@pytest.mark.parametrize("gone", ["session closed", "queued by another editor"])
async def test_an_editor_turn_whose_editor_is_gone_fails_at_once(
    runtime: Runtime, folder: Path, stopped: list[EditorTurns], gone: str
) -> None:
    session = await runtime.sessions.new_session(
        "main", origin=origin_for(str(folder)), workspace=folder
    )
    queued_by = editor_turns(runtime, live=gone != "session closed")
    turn = await queued_by.submit(session.id, "hello", folder)
    # The pool that takes it: the same editor's (its session no longer open), or the
    # pool of an editor that did not queue it (it took the turn of one that died).
    runs = queued_by if gone == "session closed" else editor_turns(runtime, live=True)
    runs.pool.start()
    stopped.append(runs)
    outcome = await runtime.turns.wait_turn(turn)
    assert outcome.status == "failed"
    assert outcome.error is not None and "is gone" in outcome.error
    job = await runtime.queue.get(turn)
    assert job is not None and job.attempts == 1  # not retried: no one could see it
