"""A file queued on one node of a PostgreSQL home is sent by the node holding the chat:
the delivery fetches the blob into its own folder from the shared table first."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import Adapter, Address, Beat, Button, Inbox
from habakkuk.channels.deliveries import DeliveryWorker, enqueue_delivery
from habakkuk.channels.delivery_types import FileDelivery
from habakkuk.channels.store import ChannelStore
from habakkuk.engine.blobs import BlobStore
from habakkuk.engine.jobs import MIGRATIONS, SCHEMA, JobQueue
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import PostgresStorage
from habakkuk.engine.store import SqliteDatabase


class FileChat(Adapter):
    """A chat that takes files, keeping what each one held when it was sent."""

    type = "files"
    capabilities = frozenset({"files"})

    def __init__(self) -> None:
        super().__init__("files")
        self.files: list[tuple[str, bytes]] = []

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        beat()

    def render(self, markdown: str) -> list[str]:
        return [markdown]

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        raise AssertionError(f"no text expected, got {chunk!r}")

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        self.files.append((name, path.read_bytes()))
        return str(len(self.files))


@pytest.fixture
async def shared(pg_url: str) -> AsyncIterator[Database]:
    db = await PostgresStorage(pg_url).open(SCHEMA)
    try:
        yield db
    finally:
        await db.close()


async def test_a_file_stored_on_another_node_is_fetched_and_sent(
    shared: Database, tmp_path: Path
) -> None:
    queuing = BlobStore(tmp_path / "node-a", shared=shared)
    sending = BlobStore(tmp_path / "node-b", shared=shared)
    blob = await queuing.put(b"name,total\nann,3\n", ".csv")
    shutil.rmtree(queuing.root)  # node A's disk: not this machine's
    control = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    try:
        queue = JobQueue(control)
        chat = FileChat()

        async def adapter_for(account: str) -> Adapter | None:
            return chat

        store = await ChannelStore.open(control)
        worker = DeliveryWorker(queue, store, adapter_for, str, blobs=sending)
        await enqueue_delivery(queue, "send:1", FileDelivery(Address("files", "7"), blob, "t.csv"))
        lease = await queue.claim(["delivery:files"])
        assert lease is not None
        await worker.run(lease)
    finally:
        await control.close()
    assert chat.files == [("t.csv", b"name,total\nann,3\n")]
    assert sending.path_for(blob.name).is_file()
