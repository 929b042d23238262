"""ntfy's details on the fake server (tests/channels/fake_ntfy.py): the access token, the
position kept atomically and read from, Markdown and quiet drafts, attachments only from
the server itself, the setup check, and the config checks of an entry."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import (
    Address,
    Attachment,
    FatalAdapterError,
    InboundMessage,
    Undeliverable,
)
from habakkuk.channels.ntfy import NtfyAdapter, NtfyState
from habakkuk.channels.ntfy_setup import check_setup
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.channels.fake_ntfy import FakeNtfy
from tests.channels.ntfy_driver import INBOX, REPLIES
from tests.helpers import eventually

TOKEN = "tk_abcdefghijklmnopqrstuvwxyz012"


def config_for(fake: FakeNtfy) -> ChannelConfig:
    config = ChannelConfig(
        type="ntfy", base_url=fake.base_url, topic=REPLIES, listen=INBOX, token_env="NTFY_TOKEN"
    )
    config.name = "ntfy"
    return config


@pytest.fixture
async def fake() -> AsyncIterator[FakeNtfy]:
    async with FakeNtfy(token=TOKEN, keepalive=0.2) as server:
        yield server


async def test_the_position_is_kept_atomically_and_read_from_after_a_drop(
    fake: FakeNtfy, tmp_path: Path
) -> None:
    path = tmp_path / "channels" / "ntfy-ntfy.json"
    adapter = NtfyAdapter(config_for(fake), TOKEN, NtfyState.load(path))
    got: list[InboundMessage] = []

    async def take(message: InboundMessage) -> None:
        got.append(message)

    beats: list[int] = []
    task = asyncio.create_task(adapter.run(take, lambda: beats.append(1)))
    try:
        await eventually(lambda: fake.streams == 1, what="the subscription")
        first = fake.store(INBOX, "one")
        await eventually(lambda: path.exists(), what="the state file")
        assert json.loads(path.read_text()) == {"last_id": first.id}
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not list(path.parent.glob(".*.tmp"))  # replaced whole, nothing left over
        await eventually(lambda: len(beats) > 3, what="keepalives to beat")
        assert [(m.text, m.chat, m.sender) for m in got] == [("one", REPLIES, f"ntfy:{INBOX}")]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    second = fake.store(INBOX, "two")  # while we were away
    again = NtfyAdapter(config_for(fake), TOKEN, NtfyState.load(path))
    task = asyncio.create_task(again.run(take, lambda: None))
    try:
        await eventually(lambda: len(got) == 2, what="the message sent meanwhile")
        assert fake.subscriptions == ["", first.id]
        assert got[1].message_id == second.id
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await adapter.close()
        await again.close()


async def test_a_refused_token_is_fatal(fake: FakeNtfy, tmp_path: Path) -> None:
    adapter = NtfyAdapter(config_for(fake), "wrong", NtfyState(tmp_path / "s.json"))
    try:
        with pytest.raises(FatalAdapterError, match=r"refused to let us read .*HTTP 401"):
            await adapter.run(lambda m: asyncio.sleep(0), lambda: None)
    finally:
        await adapter.close()


async def test_replies_are_markdown_and_a_draft_is_quiet(fake: FakeNtfy, tmp_path: Path) -> None:
    adapter = NtfyAdapter(config_for(fake), TOKEN, NtfyState(tmp_path / "s.json"))
    try:
        to = Address("ntfy", REPLIES)
        loud = await adapter.send_text(to, "**done**")
        quiet = await adapter.send_text(to, "working…", silent=True)
        first, second = fake.of(REPLIES)
        assert (first.id, second.id) == (loud, quiet)
        assert first.headers["Markdown"] == "yes" and "Priority" not in first.headers
        assert second.headers["Priority"] == "min"
        elsewhere = Attachment("document", "http://203.0.113.9/file/x", "x.txt", "text/plain")
        with pytest.raises(Undeliverable, match="is not on"):
            await adapter.download(elsewhere)
    finally:
        await adapter.close()


async def test_setup_polls_the_topic_with_the_token(fake: FakeNtfy) -> None:
    config = config_for(fake)
    assert await check_setup(config, {"NTFY_TOKEN": TOKEN}) == (
        f"127.0.0.1:{fake.port}: replies to {REPLIES}, reading {INBOX}"
    )
    with pytest.raises(SetupCheckFailed, match="HTTP 401"):
        await check_setup(config, {"NTFY_TOKEN": "wrong"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("topic: a\nlisten: a", "listen: read another topic"),
        ("topic: 'a b'\nlisten: c", "topic: 'a b' is not an ntfy topic"),
        ("topic: a", "listen: a ntfy channel needs this"),
    ],
)
def test_an_ntfy_entry_is_checked(entry: str, message: str, home: Home) -> None:
    text = (
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        "channels:\n  n:\n    type: ntfy\n"
        + "".join(f"    {line}\n" for line in entry.splitlines())
    )
    with pytest.raises(ConfigError, match=rf"config.yaml:\d+: channels\.n\.{message}"):
        parse_config(text, home.config_path, home)
