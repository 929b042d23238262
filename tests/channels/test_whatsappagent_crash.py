"""Exactly-once WhatsApp agent replies across a real SIGKILL of `habakkuk --serve` (a
subprocess): the restarted process polls on from the saved offset (or re-reads the batch,
which the gateway drops as redeliveries) and sends the reply once."""

from __future__ import annotations

import asyncio
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.channels.fake_wa_agent import ALICE, AgentDriver, FakeAgentPlatform
from tests.helpers import eventually
from tests.processes import StartServe, jobs, kill, stop

BOUND = 60.0
NOT_YET = (sqlite3.OperationalError, KeyError)


@pytest.mark.timeout(180)
async def test_a_crash_mid_reply_sends_it_once_and_the_reread_update_starts_no_turn(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with FakeAgentPlatform() as fake:
        driver = AgentDriver(fake)
        entry = textwrap.indent(driver.channel_yaml("agent"), " " * 20)
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
                channels:
                  agent:
{entry}
                """
            )
        )
        env = driver.env()
        fake.hold = asyncio.Event()  # the reply's send hangs until the kill
        first = await serve_process(home, **env)
        message_id = fake.push(ALICE, "the question")
        await eventually(lambda: fake.held == 1, what="the reply's send", timeout=BOUND)
        await kill(first)
        fake.hold.set()
        fake.hold = None
        assert fake.sent == []
        polled = len(fake.polls)

        second = await serve_process(home, **env)
        turn = f"turn:agent:{ALICE}:{message_id}"
        await eventually(
            lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
            what="the delivery",
            timeout=BOUND,
            ignore=NOT_YET,
        )
        await eventually(lambda: len(fake.polls) > polled, what="the new process's poll")
        await stop(second)
    assert [(s.to, s.text) for s in fake.sent] == [(f"user:{ALICE}", "the answer")]
    rows = jobs(home)
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]
    assert rows[turn]["attempts"] == 1
    assert rows[f"reply:{turn}"]["attempts"] == 2
    assert '"next_offset": 1' in (home / "channels" / "whatsappagent-agent.json").read_text()
