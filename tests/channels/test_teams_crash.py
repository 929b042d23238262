"""Exactly-once Teams replies across a real SIGKILL of `habakkuk --serve` (a subprocess):
the restarted process answers at the service URL kept in channels/teams-<account>.json,
and the Connector's redelivery of the activity starts no second turn."""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.teams import chat_of
from tests.channels.fake_teams import ALICE, CONVERSATION, FakeTeams
from tests.channels.test_sms_crash import BOUND, NOT_YET, free_port
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop


async def delivered(teams: FakeTeams, activity: dict[str, Any]) -> bool:
    """The Connector's POST was taken (200), as it retries until one is."""
    with contextlib.suppress(OSError):
        status, _ = await teams.post(activity)
        return status == 200
    return False


@pytest.mark.timeout(180)
async def test_a_crash_mid_reply_sends_it_once_and_the_redelivered_activity_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    async with FakeTeams() as teams:
        (home / "config.yaml").write_text(
            textwrap.dedent(
                f"""
                providers:
                  mock:
                    type: mock
                    script:
                      - "the answer"
                agents:
                  main:
                    model: mock/script
                    mode: full
                http:
                  listen: 127.0.0.1:{port}
                channels:
                  work:
                    type: teams
                    app_id: {teams.app_id}
                    password_env: TEAMS_APP_PASSWORD
                    base_url: {teams.base_url}
                    allow_from: ["{ALICE}"]
                """
            )
        )
        teams.webhook_url = f"http://127.0.0.1:{port}/channels/work"
        env = {"TEAMS_APP_PASSWORD": teams.password}
        teams.hold = asyncio.Event()  # the reply's post hangs until the kill
        first = await serve_process(home, **env)
        activity = teams.activity("the question")
        await eventually(lambda: delivered(teams, activity), what="the POST", timeout=BOUND)
        await eventually(lambda: teams.held == 1, what="the reply's post", timeout=BOUND)
        await kill(first)
        teams.hold.set()
        teams.hold = None
        assert teams.posted == []

        second = await serve_process(home, **env)
        turn = f"turn:work:{chat_of(CONVERSATION)}:{activity['id']}"
        # The restarted process answers at the service URL the file kept, unprompted.
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        # The Connector retries the activity (its answer lost in the crash): no new turn.
        await eventually(lambda: delivered(teams, activity), what="the redelivery", timeout=BOUND)
        await stop(second)
    assert [(p.conversation, p.text) for p in teams.posted] == [(CONVERSATION, "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
