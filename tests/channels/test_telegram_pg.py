"""A Telegram bot on a PostgreSQL home, end to end against the fake Bot API: a message
is answered once, its delivery and the channel's health are rows of the control schema,
and a redelivered update is dropped."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.storage import URL_ENV
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import channel_yaml
from tests.conftest import mock_config
from tests.helpers import eventually


async def test_a_telegram_message_is_answered_once_on_a_postgresql_home(
    runtime_factory: Any, tg: FakeTelegram, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_ENV, pg_url)
    runtime = await runtime_factory(mock_config("- 'echo: {input}'", extra=channel_yaml(tg)))
    assert runtime.storage.dialect == "postgres"
    runtime.start_workers()
    channels = runtime.channels
    assert channels is not None
    await channels.started()
    update = tg.message("hello there")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    turn = f"turn:tg:42:{update['message']['message_id']}"

    async def replied() -> bool:
        job = await runtime.queue.get(f"reply:{turn}")
        return job is not None and job.status == "done"

    await eventually(replied, what="the reply delivery to finish")
    tg.replay(update)  # Telegram sends the same update again: dropped
    await tg.wait_for(lambda: not tg.updates)
    second = tg.message("second")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    assert tg.texts() == ["echo: hello there", "echo: second"]
    assert second["message"]["message_id"] != update["message"]["message_id"]
    chunks = await channels.store.sent_chunks(f"reply:{turn}")
    assert list(chunks) == [0]
    status = (await channels.store.statuses())["tg"]
    assert status.state == "connected"
    assert not runtime.home.db_path("control").exists()  # nothing written to SQLite
