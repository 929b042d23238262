"""Truthful channel health through the fake Telegram, on SQLite and PostgreSQL: a message in,
a reply out and a failed delivery are recorded per account; a platform gone silent
behind an open socket is "silent", an account no live process holds is "not running";
`habakkuk channels` prints it and `--json` gives the same records."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from habakkuk import cli
from habakkuk.channels.health import health_line
from habakkuk.channels.store import Activity, ChannelStore
from habakkuk.channels.supervisor import Backoff
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.overview import ChannelHealth
from habakkuk.engine.storage import URL_ENV, Storage
from habakkuk.runtime import Runtime
from tests.channels.fake_telegram import FakeTelegram
from tests.conftest import mock_config
from tests.helpers import eventually

OpenRuntime = Callable[[], Awaitable[Runtime]]
# Short limits, so the supervisor writes its beat and notes down every second.
CHANNEL = """
channels:
  tg:
    type: telegram
    token_env: TG_TOKEN
    base_url: {url}
    allow_from: ["42"]
    poll_timeout: 1
    silent_limit: 4s
"""
FIELDS = {
    "account", "type", "state", "healthy", "since", "last_beat", "last_in", "last_out",
    "last_error", "last_error_at", "restarts", "holder", "detail",
}  # fmt: skip
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The home's control database on each engine in turn (the CLI reads the same)."""
    if request.param == "postgres":
        monkeypatch.setenv(URL_ENV, request.getfixturevalue("pg_url"))
    return str(request.param)


@pytest.fixture
def start(runtime_factory: Any, tg: FakeTelegram, engine: str) -> OpenRuntime:
    async def _start() -> Runtime:
        config = mock_config("- 'echo: {input}'", extra=CHANNEL.format(url=tg.base_url))
        runtime: Runtime = await runtime_factory(config)
        assert runtime.storage.dialect == engine
        runtime.start_workers()
        assert runtime.channels is not None
        await runtime.channels.started()
        return runtime

    return _start


async def channels_json(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """`habakkuk channels --json` run as the shell would: its exit code and the tg record."""
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, ["channels", "--json"])
    records = json.loads(capsys.readouterr().out)
    assert isinstance(records, list) and len(records) == 1
    record = records[0]
    assert isinstance(record, dict) and set(record) == FIELDS
    return code, record


async def test_a_message_in_and_the_reply_out_are_recorded_with_the_account(
    start: OpenRuntime, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    await start()
    code, before = await channels_json(capsys)
    assert before["last_in"] is None and before["last_out"] is None
    tg.message("hello")
    await tg.wait_for(lambda: tg.texts() == ["echo: hello"])
    found: dict[str, Any] = {}

    async def both_recorded() -> bool:
        nonlocal code, found
        code, found = await channels_json(capsys)
        return found["last_in"] is not None and found["last_out"] is not None

    await eventually(both_recorded, what="the message in and the reply out written down")
    assert code == 0
    assert (found["account"], found["type"], found["state"]) == ("tg", "telegram", "connected")
    assert found["healthy"] is True and found["restarts"] == 0
    assert found["last_error"] == "" and found["last_error_at"] is None
    for key in ("since", "last_beat", "last_in", "last_out"):
        assert RFC3339.match(found[key]), (key, found[key])
    assert found["last_in"] <= found["last_out"]
    assert found["holder"]  # this process, alive
    assert await asyncio.to_thread(cli.main, ["channels"]) == 0
    line = capsys.readouterr().out
    assert re.match(
        r"tg\s+telegram\s+connected\s+since \d+s ago, beat \d+s ago, in \d+s ago,", line
    )
    assert "out " in line and "never" not in line


async def test_a_failed_delivery_is_the_last_error_until_a_newer_one(
    start: OpenRuntime, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = await start()
    tg.block(42)
    tg.message("are you there?")
    found: dict[str, Any] = {}

    async def failed() -> bool:
        nonlocal found
        _, found = await channels_json(capsys)
        return bool(found["last_error"])

    await eventually(failed, what="the failed delivery written down")
    assert "403 Forbidden: bot was blocked by the user" in found["last_error"]
    assert found["last_error"].startswith("delivery reply:turn:tg:42:")
    assert RFC3339.match(found["last_error_at"])
    # The error is history, not a state: the channel still receives.
    assert found["state"] == "connected" and found["healthy"] is True
    tg.blocked.clear()
    tg.message("and now?")
    await tg.wait_for(lambda: tg.texts() == ["echo: and now?"])

    async def sent() -> bool:
        nonlocal found
        _, found = await channels_json(capsys)
        return found["last_out"] is not None

    await eventually(sent, what="the reply out written down")
    assert "bot was blocked" in found["last_error"]  # a success does not clear it
    status = (await ChannelStore(runtime.queue.db).statuses())["tg"]
    assert status.last_error_at is not None and status.last_out is not None
    assert status.last_error_at <= status.last_out
    # /status in the chat says the same.
    tg.message("/status")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    said = tg.texts()[1]
    assert "tg</b>: connected since" in said or "tg: connected since" in said
    assert "last in " in said and "bot was blocked" in said


async def test_a_platform_gone_silent_is_silent_not_connected(
    start: OpenRuntime, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = await start()
    assert runtime.channels is not None
    # Once silent, the restart waits long enough for a look from another process.
    runtime.channels.supervisor.backoff = Backoff(first=600, cap=600)
    found: dict[str, Any] = {}

    async def state_is(state: str) -> bool:
        nonlocal found
        _, found = await channels_json(capsys)
        return bool(found["state"] == state)

    await eventually(lambda: state_is("connected"), what="connected")
    tg.hang_polls()  # the socket stays open, the platform says nothing
    await eventually(lambda: state_is("silent"), what="the channel to be called silent")
    assert found["healthy"] is False

    async def torn_down() -> bool:
        # A loaded machine may show "silent" first from the stale beat (health.one_health)
        # and only then from the supervisor, which writes why it restarted.
        nonlocal found
        _, found = await channels_json(capsys)
        return "no message or keepalive for 4s" in found["last_error"]

    await eventually(torn_down, what="the supervisor to restart it for its silence")
    assert found["state"] == "silent"
    code = await asyncio.to_thread(cli.main, ["channels"])
    line = capsys.readouterr().out
    assert code == 1
    assert re.match(r"tg\s+telegram\s+silent\s", line), line
    view = await runtime.control.overview()
    assert [(h.account, h.state) for h in view.channels] == [("tg", "silent")]


async def test_a_connected_record_without_a_recent_beat_reads_as_silent(
    home: Home, engine: str, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    """A holder alive but stuck (its loop no longer writes beats) is silent to a reader."""
    home.config_path.write_text(mock_config(extra=CHANNEL.format(url=tg.base_url)))
    store, close = await _control(home)
    try:
        await store.set_status("tg", "telegram", "connected", holder="elsewhere:1:x")
        await store.db.write(
            lambda conn: conn.execute("UPDATE channel_status SET since = 900 WHERE account = 'tg'")
        )  # connected long ago, beating until a while ago
        assert await store.acquire_lease("channel:tg", "elsewhere:1:x", 600) is None
        await store.record("tg", Activity(beat=1_000.0, last_in=990.0))
    finally:
        await close()
    code, found = await channels_json(capsys)
    assert code == 1
    assert found["state"] == "silent" and found["since"] == "1970-01-01T00:16:40Z"
    assert found["last_in"] == "1970-01-01T00:16:30Z" and found["holder"] == "elsewhere:1:x"


async def test_an_account_whose_holder_died_is_not_running(
    home: Home, engine: str, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    home.config_path.write_text(mock_config(extra=CHANNEL.format(url=tg.base_url)))
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()  # its pid is free now: a holder killed with -9
    store, close = await _control(home)
    try:
        await store.set_status("tg", "telegram", "connected", holder="here:1:x")
        await store.leases.acquire("channel:tg", "here:1:x", 600, pid=child.pid)
    finally:
        await close()
    code, found = await channels_json(capsys)
    assert code == 1
    assert found["state"] == "not running" and found["holder"] == ""
    assert found["detail"].startswith("last connected ")


async def _control(home: Home) -> tuple[ChannelStore, Callable[[], Awaitable[None]]]:
    """The channel tables of the home's control database (on the engine in use)."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.storage import open_storage

    storage: Storage = open_storage(home, load_config(home))
    db = await storage.open(CONTROL)
    return await ChannelStore.open(db), db.close


async def test_an_adapter_that_cannot_start_is_fatal_with_its_error(
    start: OpenRuntime, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TG_TOKEN", "123:WRONG")  # the Bot API refuses it: 401
    await start()
    found: dict[str, Any] = {}

    async def fatal() -> bool:
        nonlocal found
        _, found = await channels_json(capsys)
        return bool(found["state"] == "fatal")

    await eventually(fatal, what="the rejected token to make the channel fatal")
    code, found = await channels_json(capsys)
    assert code == 1 and found["healthy"] is False and found["restarts"] >= 1
    assert "check the bot token" in found["last_error"] and RFC3339.match(found["last_error_at"])
    assert "WRONG" not in json.dumps(found)  # the token reaches no record


def test_a_backoff_line_says_its_error_once_and_an_older_error_with_its_age() -> None:
    error = "auth.test: cannot connect to host 127.0.0.1:9"
    backing_off = ChannelHealth(
        account="work", type="slack", state="backoff", since=100.0, last_beat=None,
        last_in=None, last_out=None, last_error=error, last_error_at=100.0, restarts=4,
        holder="vm:42:abc", detail=f"{error}; restarting in 8s",
    )  # fmt: skip
    line = health_line(backing_off, now=100.0)
    assert line.count(error) == 1 and "restarting in 8s" in line
    connected = replace(backing_off, state="connected", detail="", last_beat=160.0)
    assert f"last error 60s ago: {error}" in health_line(connected, now=160.0)
