"""The web chat is a gateway channel (type web): routes, /whoami, durable replies across a kill."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.processes import StartServe, free_port, jobs, kill, stop, until_http
from tests.server.conftest import SSEReader

ROUTED = """  ops:
    model: mock/scripted
    mode: full
channels:
  web:
    type: web
    routes:
      - chat: ops-room
        agent: ops
"""


async def test_whoami_in_the_web_chat_names_the_channel_web(serve: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    about = await served.post_json("/api/chat", {"conversation": "w1", "text": "/whoami"})
    assert about["turn"] is None
    assert "Channel web (web), chat w1" in about["message"]
    assert "Allowed by open" in about["message"]
    status = await served.post_json("/api/chat", {"conversation": "w1", "text": "/status"})
    assert "Channel web: connected" in status["message"]


async def test_a_route_of_the_web_account_picks_the_agent_of_a_conversation(serve: Any) -> None:
    served = await serve(mock_config("- text: hi", extra=ROUTED))
    routed = await served.post_json("/api/chat", {"conversation": "ops-room", "text": "hello"})
    other = await served.post_json("/api/chat", {"conversation": "lobby", "text": "hello"})
    assert (await served.runtime.sessions.session(routed["session"])).agent == "ops"
    assert (await served.runtime.sessions.session(other["session"])).agent == "main"
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(routed["turn"]), 30)
    assert outcome.status == "done"
    job = await served.runtime.queue.get(routed["turn"])
    assert job is not None and job.payload["reply_to"]["to"] == "web:ops-room"


def crash_config(release: Path, port: int) -> str:
    command = f"while [ ! -e {release} ]; do sleep 0.02; done; echo released"
    return textwrap.dedent(
        f"""
        providers:
          mock:
            type: mock
            script:
              - steps:
                  - text: "Working on it."
                    tool_calls: [{{name: exec, arguments: {{command: {json.dumps(command)}}}}}]
                  - text: "The one and only reply."
        agents:
          main:
            model: mock/scripted
            mode: full
        http:
          listen: 127.0.0.1:{port}
        """
    )


def web_rows(home: Path, conversation: str) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(home / "web.db")) as conn:
        rows = conn.execute(
            "SELECT role, text FROM events WHERE conversation = ? ORDER BY seq", (conversation,)
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


@pytest.mark.timeout(180)
async def test_a_web_reply_survives_a_kill_between_the_turns_end_and_its_delivery(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    release = tmp_path / "release"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (home / "config.yaml").write_text(crash_config(release, port))
    body = {"conversation": "k1", "text": "the slow one", "id": "client-1"}
    first = await serve_process(home)
    await until_http(first)
    lock = None
    try:
        async with (
            aiohttp.ClientSession() as client,
            client.post(url + "/api/chat", json=body) as response,
        ):
            assert response.status == 202, await response.text()
            sent = await response.json()
        turn = sent["turn"]
        # web.db held by another writer: the turn ends, its reply delivery cannot append.
        lock = sqlite3.connect(home / "web.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        release.touch()
        await eventually(
            lambda: jobs(home)[turn]["status"] == "done",
            what="the turn's end",
            timeout=60,
            ignore=(sqlite3.OperationalError, KeyError),
        )
        await eventually(
            lambda: f"reply:{turn}" in jobs(home),
            what="the reply's delivery job",
            timeout=60,
            ignore=(sqlite3.OperationalError, KeyError),
        )
    finally:
        await kill(first)
        if lock is not None:
            lock.rollback()
            lock.close()
    assert web_rows(home, "k1") == [("user", "the slow one")]

    second = await serve_process(home)
    await until_http(second)
    try:
        async with aiohttp.ClientSession() as client:
            async with client.get(url + "/api/chat/k1/events?after=0") as response:
                reader = SSEReader(response)
                frames = [await reader.until(lambda f: f.get("event") == "message")]
                frames.append(await reader.until(lambda f: f.get("event") == "message"))
            await eventually(
                lambda: jobs(home)[f"reply:{turn}"]["status"] == "done",
                what="the delivery",
                timeout=60,
                ignore=(sqlite3.OperationalError, KeyError),
            )
            async with client.post(url + "/api/chat", json=body) as response:
                again = await response.json()
    finally:
        await stop(second)
    assert [(f["data"]["role"], f["data"]["text"]) for f in frames] == [
        ("user", "the slow one"),
        ("assistant", "The one and only reply."),
    ]
    assert frames[1]["data"]["turn"] == turn
    assert again == {"message": "already received", "turn": turn}
    assert web_rows(home, "k1") == [
        ("user", "the slow one"),
        ("assistant", "The one and only reply."),
    ]
    rows = jobs(home)
    assert rows[turn]["attempts"] == 1  # the turn ran once
    assert [r for r in rows if rows[r]["kind"] == "turn"] == [turn]


async def test_a_message_is_accepted_while_the_web_adapter_is_down_and_answered_after(
    serve: Any,
) -> None:
    served = await serve(mock_config("- text: 'Echo: {input}'"))
    channels = served.runtime.channels
    config = channels.gateway.channels["web"]
    await channels.supervisor.remove("web")  # the adapter is down (as while it restarts)
    sent = await served.post_json("/api/chat", {"conversation": "d1", "text": "still there?"})
    assert sent["message"] == "queued"
    with served.runtime.bus.subscribe(lambda e: e.kind == "job.finished") as finished:
        await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
        health = await served.get_json("/healthz")
        assert health["status"] == "ok"
        assert await served.runtime.queue.get(f"reply:{sent['turn']}") is not None
        assert [e.role for e in await served.server.web_store().events("d1")] == ["user"]
        channels.supervisor.add(config)  # back up: the queued reply goes out
        while (await asyncio.wait_for(finished.get(), 30)).data["job"] != f"reply:{sent['turn']}":
            pass
    events = await served.server.web_store().events("d1")
    assert [(e.role, e.text) for e in events] == [
        ("user", "still there?"),
        ("assistant", "Echo: still there?"),
    ]


def test_the_web_chats_account_must_be_of_type_web(home: Any) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.errors import ConfigError

    text = mock_config(
        extra="http: {}\nchannels:\n  web:\n    type: telegram\n    token_env: TG_TOKEN\n"
    )
    with pytest.raises(ConfigError, match=r"channels\.web: the web chat's account"):
        parse_config(text, home.config_path, home)
