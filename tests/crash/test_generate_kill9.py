"""Nothing paid twice, with real processes: `habakkuk --serve` is killed with SIGKILL while
video_generate polls its job; the next `--serve` resumes the turn, which runs the call
again with its own tool_use_id: it finds the recorded job and polls it. The provider sees
exactly one submit, and the turn ends with one saved clip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.fakes.media_gen import MP4, FakeMedia
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, kill, query, stop

CONFIG = """
providers:
  mock:
    type: mock
    script:
      - text: "Making the clip."
        tool_calls:
          - name: video_generate
            arguments: {{prompt: "waves at dusk", seconds: 8}}
      - text: "Here is your clip."
agents:
  main:
    model: mock/script
    mode: full
video:
  provider: openai
  base_url: {url}/v1
  key_env: FAKE_VIDEO_KEY
  poll_interval: 50ms
"""


async def submit(home: Path, text: str) -> str:
    """A turn queued without workers (the served process runs it); its id."""
    root = Home(home)
    runtime = await Runtime.open(
        root, parse_config(root.config_path.read_text(), root.config_path, root)
    )
    try:
        session = await runtime.sessions.new_session("main")
        return await runtime.turns.submit(session.id, text)
    finally:
        await runtime.close()


@pytest.mark.timeout(240)
async def test_sigkill_mid_video_poll_then_serve_polls_the_same_job_and_saves_one_clip(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeMedia(hold=True) as fake:
        (home / "config.yaml").write_text(CONFIG.format(url=fake.url))
        turn = await submit(home, "make me a clip of the sea")
        control, state = home / "control.db", home / "state.db"

        first = await serve_process(home, FAKE_VIDEO_KEY="k")
        await eventually(
            lambda: fake.polled("/v1/videos/video_1") >= 2, what="the job polled", timeout=BOUND
        )
        await kill(first)
        [record] = query(state, "SELECT status, job, tool, provider FROM provider_jobs")
        assert tuple(record) == ("running", "video_1", "video_generate", "openai")
        [job] = query(control, "SELECT status FROM jobs WHERE id = ?", (turn,))
        assert job["status"] == "running"  # its owner died holding it

        fake.hold = False  # the provider finishes the job meanwhile
        second = await serve_process(home, FAKE_VIDEO_KEY="k")
        await eventually(
            lambda: query(control, "SELECT 1 FROM jobs WHERE id = ? AND status = 'done'", (turn,)),
            what="the resumed turn to finish",
            timeout=BOUND,
        )
        await stop(second)

    assert len(fake.submits("/v1/videos")) == 1  # one paid job
    assert all(s.key == "Bearer k" for s in fake.seen)
    [done] = query(control, "SELECT attempts, result FROM jobs WHERE id = ?", (turn,))
    assert done["attempts"] == 2
    assert json.loads(done["result"])["reply"] == "Here is your clip."
    clips = list((home / "agents" / "main" / "workspace" / "videos").iterdir())
    assert len(clips) == 1 and clips[0].read_bytes() == MP4
    rows = query(home / "transcripts.db", "SELECT role, blocks FROM messages ORDER BY seq")
    assert [r["role"] for r in rows] == ["user", "assistant", "user", "assistant"]
    [call] = [b for b in json.loads(rows[1]["blocks"]) if b["type"] == "tool_use"]
    [result] = json.loads(rows[2]["blocks"])
    assert result["tool_use_id"] == call["tool_use_id"]
    assert result["is_error"] is False and f"videos/{clips[0].name}" in result["text"]
    [record] = query(state, "SELECT status FROM provider_jobs")
    assert record["status"] == "done"
