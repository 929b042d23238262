"""A file to a chat that cannot receive files is told in that chat (its caption, a note
and where the file is saved), once; the web chat's file entries are deduped by the
delivery job, so a retried delivery appends nothing twice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.adapter import Adapter, Address, Beat, Button, Inbox
from habakkuk.channels.deliveries import DeliveryWorker, enqueue_delivery
from habakkuk.channels.delivery_types import FileDelivery
from habakkuk.channels.store import ChannelStore
from habakkuk.channels.web import FILE_ROLE, WebAdapter, chat_of, web_account
from habakkuk.engine.jobs import MIGRATIONS, JobQueue, Lease
from habakkuk.engine.pools import PermanentJobError
from habakkuk.engine.store import Database, SqliteDatabase
from habakkuk.server.webstore import WebStore


class TextOnly(Adapter):
    """A chat that takes text and nothing else (no "files" capability)."""

    type = "pager"

    def __init__(self) -> None:
        super().__init__("pager")
        self.sent: list[str] = []

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
        self.sent.append(chunk)
        return str(len(self.sent))


@pytest.fixture
async def control(tmp_path: Path) -> AsyncIterator[Database]:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    yield db
    await db.close()


async def _worker(control: Database, adapter: Adapter) -> tuple[DeliveryWorker, JobQueue]:
    store = await ChannelStore.open(control)
    queue = JobQueue(control)

    async def adapter_for(account: str) -> Adapter | None:
        return adapter

    return DeliveryWorker(queue, store, adapter_for, lambda error: error), queue


async def _claim(queue: JobQueue, kind: str) -> Lease:
    lease = await queue.claim([kind])
    assert lease is not None
    return lease


async def test_a_chat_without_files_gets_the_caption_and_where_the_file_is_once(
    control: Database, tmp_path: Path
) -> None:
    adapter = TextOnly()
    worker, queue = await _worker(control, adapter)
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4")
    delivery = FileDelivery(Address("pager", "7"), report, "report.pdf", "This month's numbers")
    await enqueue_delivery(queue, "send:1", delivery)
    lease = await _claim(queue, "delivery:pager")
    with pytest.raises(PermanentJobError, match=r"^not sent: the file report\.pdf: pager chats"):
        await worker.run(lease)
    assert adapter.sent == [
        "This month's numbers\n\nCould not send the file report.pdf here: "
        f"pager chats cannot receive files; saved at {report}."
    ]
    # Run again (a crash between telling the chat and failing the job): nothing is resent.
    with pytest.raises(PermanentJobError):
        await worker.run(lease)
    assert len(adapter.sent) == 1


async def test_a_file_gone_from_disk_says_so_without_a_path(
    control: Database, tmp_path: Path
) -> None:
    adapter = TextOnly()
    worker, queue = await _worker(control, adapter)
    delivery = FileDelivery(Address("pager", "7"), tmp_path / "gone.csv")
    await enqueue_delivery(queue, "send:2", delivery)
    with pytest.raises(PermanentJobError):
        await worker.run(await _claim(queue, "delivery:pager"))
    assert adapter.sent == ["Could not send the file gone.csv here: it is no longer on disk."]


async def test_a_retried_web_file_delivery_appends_one_entry(
    control: Database, tmp_path: Path
) -> None:
    web = await WebStore.open(tmp_path / "web.db")
    try:
        adapter = WebAdapter(web_account(None, "web"), web)
        worker, queue = await _worker(control, adapter)
        data = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
        picture = tmp_path / "chart"
        picture.write_bytes(data)
        to = Address("web", chat_of("a:b"))
        await enqueue_delivery(queue, "send:3", FileDelivery(to, picture, "chart.png", "look"))
        lease = await _claim(queue, "delivery:web")
        first: dict[str, Any] = await worker.run(lease)
        await control.write(lambda c: c.execute("DELETE FROM delivery_chunks"))  # lost record
        again: dict[str, Any] = await worker.run(lease)
        assert first == again
        [entry] = await web.events("a:b")
        assert entry.role == FILE_ROLE and entry.text == "look"
        assert entry.file is not None
        assert (entry.file.name, entry.file.size, entry.file.media_type) == (
            "chart.png",
            len(data),
            "image/png",
        )
        assert await web.file("a:b", entry.file.id) == entry.file
        assert await web.file("other", entry.file.id) is None
        assert entry.to_json()["file"]["url"] == f"/api/chat/a%3Ab/files/{entry.file.id}"
    finally:
        await web.close()
