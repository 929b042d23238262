"""The web chat on a PostgreSQL home, end to end: a message posted over HTTP is a turn,
its reply streams back from the web schema, and the call is in the usage schema."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.storage import URL_ENV
from tests.conftest import mock_config
from tests.server.conftest import SSEReader

SCRIPT = """
- steps:
    - text: "Echo: {input}"
"""


async def test_a_web_chat_message_is_answered_on_a_postgresql_home(
    serve: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_ENV, pg_url)
    served = await serve(mock_config(SCRIPT))
    assert served.runtime.storage.dialect == "postgres"
    sent = await served.post_json("/api/chat", {"conversation": "c1", "text": "hello"})
    async with served.client.get(
        f"{served.url}/api/chat/c1/events?after=0", headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        first = await reader.until(lambda f: f.get("event") == "message")
        reply = await reader.until(lambda f: f.get("event") == "message")
    assert (first["data"]["role"], first["data"]["text"]) == ("user", "hello")
    assert (reply["data"]["role"], reply["data"]["text"]) == ("assistant", "Echo: hello")
    assert reply["data"]["turn"] == sent["turn"]
    (total,) = await served.runtime.usage.totals(session=sent["session"])
    assert total.calls == 1 and total.agent == "main"
    assert not served.runtime.home.db_path("web").exists()  # nothing written to SQLite
