"""A web chat's file is served by any node of a PostgreSQL home: the node answering
fetches the blob another node stored into its own folder from the shared table."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.web import ChatFile
from habakkuk.engine.blobs import BlobStore
from habakkuk.engine.jobs import SCHEMA
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import PostgresStorage


@pytest.fixture
async def shared(pg_url: str) -> AsyncIterator[Database]:
    db = await PostgresStorage(pg_url).open(SCHEMA)
    try:
        yield db
    finally:
        await db.close()


async def test_a_web_chat_file_stored_on_another_node_is_served_from_the_shared_table(
    serve: Any, shared: Database, tmp_path: Path
) -> None:
    served = await serve("http:\n")
    stored_on = BlobStore(tmp_path / "node-a", shared=shared)
    blob = await stored_on.put(b"%PDF-1.4 the report", ".pdf")
    shutil.rmtree(stored_on.root)  # node A's disk: not this machine's
    served.runtime.blobs = BlobStore(tmp_path / "node-b", shared=shared)
    file_id = "file_" + "ab" * 12
    await served.server.web_store().append(
        "w1", "file", "", file=ChatFile(file_id, "report.pdf", 19, "application/pdf", str(blob))
    )
    url = f"{served.url}/api/chat/w1/files/{file_id}"
    async with served.client.get(url, headers=served.auth()) as response:
        assert response.status == 200
        assert await response.read() == b"%PDF-1.4 the report"
    # Gone everywhere (retention): a 404, as before.
    await shared.write(lambda conn: conn.execute("DELETE FROM blobs"))
    served.runtime.blobs = BlobStore(tmp_path / "node-c", shared=shared)
    async with served.client.get(url, headers=served.auth()) as response:
        assert response.status == 404
