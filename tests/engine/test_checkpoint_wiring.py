"""Checkpoints as the turn takes them, /undo through the runtime, and the two CLI commands."""

from __future__ import annotations

import asyncio
import io
import shutil
import textwrap
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.errors import HabakkukError
from habakkuk.runtime import Runtime
from tests.conftest import mock_config

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not on PATH")

SCRIPT = """
- match: "two writes"
  steps:
    - tool_calls:
        - {name: write_file, arguments: {path: a.txt, content: "A2"}}
        - {name: write_file, arguments: {path: b.txt, content: "B2"}}
    - text: "wrote two"
- match: "edit"
  steps:
    - tool_calls:
        - {name: edit_file, arguments: {path: a.txt, old_string: "A2", new_string: "A3"}}
    - text: "edited"
- match: "read"
  steps:
    - tool_calls:
        - {name: read_file, arguments: {path: a.txt}}
    - text: "read"
- match: "outside"
  steps:
    - tool_calls:
        - {name: exec, arguments: {command: "true", cwd: "/"}}
    - text: "ran outside"
- steps:
    - text: "ok"
"""


async def run(runtime: Runtime, session: str, text: str) -> str:
    turn = await runtime.turns.submit(session, text)
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "done", outcome.error
    return turn


async def open_runtime(runtime_factory: Any, extra: str = "") -> Any:
    runtime = await runtime_factory(mock_config(SCRIPT, mode="full", extra=extra))
    workspace = runtime.config.agents["main"].workspace_path
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "a.txt").write_text("A1")
    runtime.start_workers()
    return runtime, workspace


async def test_parallel_writes_take_one_snapshot_of_the_state_before(
    runtime_factory: Any,
) -> None:
    runtime, workspace = await open_runtime(runtime_factory)
    session = await runtime.sessions.new_session()
    await run(runtime, session.id, "two writes")
    found = await runtime.checkpointing.for_agent("main").list()
    assert [(c.kind, c.session, c.request) for c in found] == [("turn", session.id, "two writes")]
    assert (workspace / "a.txt").read_text() == "A2"


async def test_reads_and_commands_outside_the_workspace_take_none(runtime_factory: Any) -> None:
    runtime, _ = await open_runtime(runtime_factory)
    session = await runtime.sessions.new_session()
    await run(runtime, session.id, "read it")
    await run(runtime, session.id, "run outside")
    assert await runtime.checkpointing.for_agent("main").list() == []


async def test_checkpoints_false_turns_them_off(runtime_factory: Any, home: Any) -> None:
    runtime, _ = await open_runtime(runtime_factory, extra="checkpoints: false\n")
    session = await runtime.sessions.new_session()
    await run(runtime, session.id, "two writes")
    assert runtime.checkpointing.for_agent("main") is None
    assert not home.checkpoints_dir("main").exists()


async def test_undo_walks_back_through_the_sessions_turns(runtime_factory: Any) -> None:
    runtime, workspace = await open_runtime(runtime_factory)
    session = await runtime.sessions.new_session()
    await run(runtime, session.id, "two writes")
    await run(runtime, session.id, "edit a")
    assert (workspace / "a.txt").read_text() == "A3"
    reply = await runtime.checkpointing.undo(session.id)
    assert "restored" in reply and "a.txt" in reply
    assert (workspace / "a.txt").read_text() == "A2" and (workspace / "b.txt").exists()
    await runtime.checkpointing.undo(session.id)
    assert (workspace / "a.txt").read_text() == "A1" and not (workspace / "b.txt").exists()
    assert "nothing to undo" in await runtime.checkpointing.undo(session.id)
    # The transcript is not changed by /undo.
    assert len(await runtime.sessions.messages(session.id)) == 8


async def test_undo_refuses_while_a_turn_of_the_session_is_queued(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config(SCRIPT))
    session = await runtime.sessions.new_session()
    await runtime.turns.submit(session.id, "two writes")  # no workers: it stays queued
    with pytest.raises(HabakkukError, match="queued or running"):
        await runtime.checkpointing.undo(session.id)


CLI_CONFIG = textwrap.dedent(
    """\
    providers:
      mock:
        type: mock
        script:
          - tool_calls:
              - {name: write_file, arguments: {path: a.txt, content: "changed"}}
          - text: "done"
    agents:
      main:
        model: mock/x
        mode: full
    """
)


def test_cli_lists_checkpoints_and_rolls_back_after_confirming(
    home: Any, write_config: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(CLI_CONFIG)
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "a.txt").write_text("original")
    assert main(["run", "--json", "change it"]) == 0
    assert (workspace / "a.txt").read_text() == "changed"
    capsys.readouterr()
    assert main(["checkpoints", "-n", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and " turn " in lines[0] and lines[0].endswith("change it")
    checkpoint = lines[0].split()[0]

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["rollback", checkpoint]) == 1
    out = capsys.readouterr().out
    assert "a.txt" in out and "restore these changes?" in out
    assert (workspace / "a.txt").read_text() == "changed"

    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["rollback", checkpoint, "a.txt"]) == 0
    assert (workspace / "a.txt").read_text() == "original"
    capsys.readouterr()
    assert main(["checkpoints"]) == 0
    kinds = [line.split()[3] for line in capsys.readouterr().out.strip().splitlines()]
    assert kinds == ["rollback", "turn"]  # the replaced state was snapshotted first


def test_cli_rollback_with_yes_does_not_ask(home: Any, write_config: Any, capsys: Any) -> None:
    write_config(CLI_CONFIG)
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "a.txt").write_text("original")
    assert main(["run", "--json", "change it"]) == 0
    capsys.readouterr()
    main(["checkpoints"])
    checkpoint = capsys.readouterr().out.split()[0]
    assert main(["rollback", "-y", checkpoint]) == 0
    assert (workspace / "a.txt").read_text() == "original"


def test_cli_rollback_of_an_unknown_id_is_a_clear_error(
    home: Any, write_config: Any, capsys: Any
) -> None:
    write_config(CLI_CONFIG)
    home.default_workspace("main").mkdir(parents=True)
    assert main(["rollback", "-y", "deadbeef"]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    assert main(["run", "--json", "change it"]) == 0
    capsys.readouterr()
    assert main(["rollback", "-y", "deadbeef"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("habakkuk: ") and "deadbeef" in err and "Traceback" not in err


async def test_calls_that_will_be_denied_take_no_snapshot(runtime_factory: Any) -> None:
    script = """
    - tool_calls:
        - {name: exec, arguments: {command: "touch x"}}
        - {name: exec, arguments: {command: "rm -rf /"}}
    - text: "denied"
    """
    runtime = await runtime_factory(mock_config(script, mode="ask"))
    runtime.config.agents["main"].workspace_path.mkdir(parents=True, exist_ok=True)
    runtime.start_workers()
    session = await runtime.sessions.new_session()
    await run(runtime, session.id, "try")  # unattended: the exec is denied, rm is hardline
    assert await runtime.checkpointing.for_agent("main").list() == []
