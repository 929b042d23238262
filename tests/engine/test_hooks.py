"""Hooks: tool_before blocks (and fails closed), other events run in the background."""

from __future__ import annotations

import asyncio
import json
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.hooks import Hooks, run_hook
from tests.helpers import eventually
from tests.hook_log import HookLog

BOUND = 20.0


@dataclass
class Hook:
    event: str
    command: str
    timeout: float = 10.0
    match: str | None = None


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return data[data.rfind(b")") + 2 :].split()[0] == b"Z"


async def test_hook_gets_the_event_on_stdin_and_env_and_runs_in_home(tmp_path: Path) -> None:
    out = tmp_path / "seen.txt"
    command = (
        f'cat > {out}.json; printf "%s %s %s\\n" "$HABAKKUK_EVENT" "$HABAKKUK_HOME" "$PWD" > {out}'
    )
    result = await run_hook(Hook("tool_before", command), "tool_before", {"tool": "exec"}, tmp_path)
    assert result.ok
    assert out.read_text().split() == ["tool_before", str(tmp_path), str(tmp_path)]
    assert json.loads(Path(f"{out}.json").read_text()) == {"event": "tool_before", "tool": "exec"}


async def test_non_zero_exit_blocks_with_stdout_as_the_reason(tmp_path: Path) -> None:
    hooks = Hooks([Hook("tool_before", "echo 'no deploys on Friday'; exit 3")], tmp_path)
    assert await hooks.guard("tool_before", "exec", {}) == "no deploys on Friday"


async def test_silent_failure_still_gives_a_reason(tmp_path: Path) -> None:
    hooks = Hooks([Hook("tool_before", "exit 1")], tmp_path)
    reason = await hooks.guard("tool_before", "exec", {})
    assert reason is not None and "exited with code 1" in reason


async def test_a_hook_that_times_out_blocks_and_its_group_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    command = f"sleep 300 & echo $! > {pidfile}; wait"
    hooks = Hooks([Hook("tool_before", command, timeout=0.5)], tmp_path)
    reason = await hooks.guard("tool_before", "exec", {})
    assert reason is not None and "timed out" in reason
    child = int(pidfile.read_text())
    await eventually(lambda: pid_gone(child), what="the hook's child to be killed")


async def test_a_hook_that_cannot_start_blocks(tmp_path: Path) -> None:
    hooks = Hooks([Hook("tool_before", "true")], tmp_path / "no-such-home")
    reason = await hooks.guard("tool_before", "exec", {})
    assert reason is not None and "could not start" in reason


async def test_match_picks_the_subject(tmp_path: Path) -> None:
    hooks = Hooks([Hook("tool_before", "exit 1", match="^exec$")], tmp_path)
    assert await hooks.guard("tool_before", "read_file", {}) is None
    assert await hooks.guard("tool_before", "exec", {}) is not None


async def test_passing_hooks_let_the_call_through(tmp_path: Path) -> None:
    hooks = Hooks([Hook("tool_before", "true"), Hook("tool_before", "echo fine")], tmp_path)
    assert await hooks.guard("tool_before", "exec", {}) is None


async def test_background_events_do_not_wait(tmp_path: Path) -> None:
    release = tmp_path / "release"
    out = tmp_path / "done.txt"
    command = f"while [ ! -e {release} ]; do sleep 0.02; done; echo done > {out}"
    hooks = Hooks([Hook("turn_end", command)], tmp_path)
    hooks.fire("turn_end", "main", {})  # returns at once although the hook waits
    assert not out.exists()
    release.touch()
    await eventually(
        lambda: out.exists() and out.read_text().endswith("\n"), what=f"the hook to write {out}"
    )
    assert out.read_text() == "done\n"
    await hooks.drain()


# -- through the runtime -----------------------------------------------------------------


def hooks_config(tmp_path: Path, hooks_yaml: str) -> str:
    return textwrap.dedent(
        """\
        providers:
          mock:
            type: mock
            script:
              - tool_calls:
                  - {name: exec, arguments: {command: "echo ran > ran.txt"}}
                  - {name: list_dir, arguments: {}}
              - text: "finished"
        agents:
          main:
            model: mock/scripted
            mode: full
        checkpoints: false
        hooks:
        """
    ) + textwrap.indent(textwrap.dedent(hooks_yaml), "  ")


async def test_tool_before_hook_blocks_exec_in_a_turn(runtime_factory: Any, tmp_path: Path) -> None:
    logs = tmp_path / "events"
    logs.mkdir()
    save = f'cat > "$(mktemp {logs}/ev.XXXXXX)"'
    config = hooks_config(
        tmp_path,
        f"""\
        - {{event: tool_before, command: "echo blocked by policy; exit 1", match: "^exec$"}}
        - {{event: turn_start, command: '{save}'}}
        - {{event: tool_after, command: '{save}'}}
        - {{event: turn_end, command: '{save}'}}
        """,
    )
    runtime = await runtime_factory(config)
    session = await runtime.sessions.new_session()
    runtime.start_workers()
    turn = await runtime.turns.submit(session.id, "go")
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
    assert outcome.status == "done"
    results = (await runtime.sessions.messages(session.id))[2].message.tool_results
    assert (
        results[0].is_error
        and "blocked by a tool_before hook: blocked by policy" in results[0].text
    )
    assert not results[1].is_error  # list_dir did not match
    workspace = runtime.config.agents["main"].workspace_path
    assert not (workspace / "ran.txt").exists()
    await runtime.hooks.drain()
    events = [json.loads(p.read_text()) for p in logs.iterdir()]
    kinds = sorted(e["event"] for e in events)
    assert kinds == ["tool_after", "tool_after", "turn_end", "turn_start"]
    start = next(e for e in events if e["event"] == "turn_start")
    assert start["agent"] == "main" and start["text"] == "go" and start["turn"] == turn
    end = next(e for e in events if e["event"] == "turn_end")
    assert end["status"] == "done" and end["reply"] == "finished"


async def test_a_new_session_fires_session_new_once_with_its_agent_as_subject(
    runtime_factory: Any, tmp_path: Path
) -> None:
    log = HookLog(tmp_path / "hooks")
    hooks = log.config(log.entry("session_new", "ops", "^ops$"), log.entry("session_new", "any"))
    config = BASE + "  ops: {model: mock/x}\n" + hooks
    runtime = await runtime_factory(config)
    ops = await runtime.sessions.new_session("ops", origin="cli")
    main = await runtime.sessions.new_session(origin="schedule", session_id="ses_slot1")
    again = await runtime.sessions.new_session(origin="schedule", session_id="ses_slot1")
    assert again.id == main.id  # a repeat returns the session: nothing new, no hook
    await runtime.hooks.drain()
    assert log.events("ops") == [
        {"event": "session_new", "agent": "ops", "session": ops.id, "origin": "cli", "chat": False}
    ]
    assert sorted((e["agent"], e["session"]) for e in log.events("any")) == sorted(
        [("ops", ops.id), ("main", main.id)]
    )


# -- config ---------------------------------------------------------------------------------


def parse(text: str, tmp_path: Path) -> Any:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home

    return parse_config(textwrap.dedent(text), tmp_path / "config.yaml", Home(tmp_path))


BASE = """\
providers:
  mock: {type: mock}
agents:
  main: {model: mock/x}
"""


def test_hooks_and_checkpoint_settings_are_read(tmp_path: Path) -> None:
    config = parse(
        BASE + "hooks:\n  - {event: tool_before, command: 'exit 0', match: '^exec$'}\n"
        "checkpoints: false\ncheckpoint_max_mb: 50\n",
        tmp_path,
    )
    assert config.hooks[0].timeout == 10.0 and config.hooks[0].match == "^exec$"
    assert config.checkpoints is False and config.checkpoint_max_mb == 50


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("hooks:\n  - {event: tool_maybe, command: x}\n", "hooks[0].event: must be one of"),
        ("hooks:\n  - {event: turn_end, command: x, match: '('}\n", "hooks[0].match: bad"),
        ("hooks:\n  - {event: turn_end, command: x, timeout: 0}\n", "hooks[0].timeout"),
        ("hooks:\n  - {event: turn_end, command: ' '}\n", "hooks[0].command: is empty"),
        ("hooks:\n  - {event: turn_end, command: x, when: y}\n", "hooks[0].when: unknown key"),
        ("checkpoint_max_mb: 0\n", "checkpoint_max_mb: must be >= 1"),
    ],
)
def test_bad_hook_config_names_the_key(tmp_path: Path, extra: str, message: str) -> None:
    from habakkuk.engine.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        parse(BASE + extra, tmp_path)


def test_reviewer_model_must_name_a_configured_provider(tmp_path: Path) -> None:
    from habakkuk.engine.errors import ConfigError

    config = parse(BASE.replace("{model: mock/x}", "{model: mock/x, reviewer_model: mock/judge}"),
                   tmp_path)  # fmt: skip
    assert [str(r) for r in config.agents["main"].reviewer_chain] == ["mock/judge"]
    with pytest.raises(ConfigError, match=r"agents\.main\.reviewer_model: provider 'other'"):
        parse(BASE.replace("{model: mock/x}", "{model: mock/x, reviewer_model: other/judge}"),
              tmp_path)  # fmt: skip
