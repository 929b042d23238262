"""The channel CLI commands read control where the config says: on PostgreSQL, a
channel's health another node recorded is what `habakkuk channels` prints."""

from __future__ import annotations

import pytest

from habakkuk.channels.commands import channels_status
from habakkuk.channels.store import ChannelStore
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.storage import URL_ENV, PostgresStorage
from tests.conftest import WriteConfig, mock_config

CHANNEL = """
channels:
  tg:
    type: telegram
    token_env: TG_TOKEN
"""


async def test_channels_status_reads_another_nodes_record_on_postgresql(
    home: Home,
    write_config: WriteConfig,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(mock_config(extra=CHANNEL))
    monkeypatch.setenv(URL_ENV, pg_url)
    db = await PostgresStorage(pg_url).open(CONTROL)
    try:  # the node serving the bot
        node = await ChannelStore.open(db)
        await node.set_status("tg", "telegram", "connected", holder="node-a:7:abc")
        assert await node.acquire_lease("channel:tg", "node-a:7:abc", 60) is None
    finally:
        await db.close()
    assert await channels_status(home) == 0
    out = capsys.readouterr().out
    assert out.startswith("tg ") and "connected" in out and "held by node-a:7" in out
    assert not home.db_path("control").exists()  # nothing written to SQLite meanwhile
