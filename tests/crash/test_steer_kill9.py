"""/steer survives a crash, with real processes: `habakkuk run --session S "/steer ..."`
steers a turn `habakkuk --serve` is running (its tool call under way); the serve is killed
with SIGKILL before the turn's next model call. The next `--serve` resumes the turn and
the guidance goes with the resumed tool results, so it reaches the next model call, once:
one copy in the transcript, no follow-up turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from habakkuk.engine.agent.guidance import follow_up_id
from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, kill, query, stop

GUIDANCE = "answer in metric units"
CONFIG = """
providers:
  mock:
    type: mock
    script:
      - text: "Measuring."
        tool_calls:
          - name: exec
            arguments: {command: "echo $$ > started.pid; exec sleep 60"}
      - text: "384,400 km."
agents:
  main:
    model: mock/script
    mode: full
"""


async def submit(home: Path, text: str) -> tuple[str, str]:
    """A turn queued without workers (the served process runs it): (session, turn)."""
    root = Home(home)
    runtime = await Runtime.open(
        root, parse_config(root.config_path.read_text(), root.config_path, root)
    )
    try:
        session = await runtime.sessions.new_session("main")
        return session.id, await runtime.turns.submit(session.id, text)
    finally:
        await runtime.close()


async def run_steer(home: Path, session: str, text: str) -> tuple[int, str]:
    """`habakkuk run --session S "/steer TEXT"`: its exit code and what it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", "run", "--session", session, f"/steer {text}",
        env={**os.environ, "HABAKKUK_HOME": str(home)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), BOUND)
    return int(process.returncode or 0), (out + err).decode(errors="replace")


@pytest.mark.timeout(240)
async def test_sigkill_after_a_steer_then_serve_delivers_the_guidance_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    marker = home / "agents" / "main" / "workspace" / "started.pid"
    session, turn = await submit(home, "how far is the moon?")
    control, state = home / "control.db", home / "state.db"

    first = await serve_process(home)
    await eventually(
        lambda: marker.exists() and marker.read_text().strip() != "",
        what="the tool call to start",
        timeout=BOUND,
    )
    code, said = await run_steer(home, session, GUIDANCE)
    assert code == 0 and "Guidance queued" in said, said
    await kill(first)
    # The killed process's child (in its own process group) is not ours to keep.
    with contextlib.suppress(ProcessLookupError, ValueError):
        os.killpg(int(marker.read_text().strip()), signal.SIGKILL)
    [pending] = query(state, "SELECT text, taken_by FROM guidance")
    assert tuple(pending) == (GUIDANCE, "")  # kept across the crash, not taken yet

    second = await serve_process(home)
    await eventually(
        lambda: query(control, "SELECT 1 FROM jobs WHERE id = ? AND status = 'done'", (turn,)),
        what="the resumed turn to finish",
        timeout=BOUND,
    )
    await stop(second)

    [taken] = query(state, "SELECT taken_by FROM guidance")
    assert taken["taken_by"] == turn
    rows = query(home / "transcripts.db", "SELECT role, blocks FROM messages ORDER BY seq")
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
    carrying = [r for r in rows if GUIDANCE in r["blocks"]]
    assert len(carrying) == 1  # once
    blocks = json.loads(carrying[0]["blocks"])
    assert blocks[0]["type"] == "tool_result" and blocks[0]["is_error"] is True
    assert any(b["type"] == "context" and GUIDANCE in b["text"] for b in blocks)
    assert not query(control, "SELECT 1 FROM jobs WHERE id = ?", (follow_up_id(turn),))
