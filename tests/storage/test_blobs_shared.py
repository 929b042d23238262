"""Blobs on every node: a blob one node stores is found by another, through the shared
table on PostgreSQL (each node has its own folder) and the one folder on SQLite."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.blobs import BlobNotFound, BlobStore
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.llm.types import DocumentBlock, ImageBlock, TextBlock
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import PostgresStorage, Storage

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def another_machine(stored_on: BlobStore, reader: BlobStore) -> None:
    """Make `stored_on`'s folder invisible to `reader`, as another machine's disk is
    (nothing to do when they share one folder: SQLite's one home)."""
    if stored_on.root != reader.root:
        shutil.rmtree(stored_on.root)


@pytest.fixture
async def nodes(storage: Storage, tmp_path: Path) -> AsyncIterator[tuple[BlobStore, BlobStore]]:
    """Two nodes' blob stores: on PostgreSQL, two folders and two connections to one
    database; on SQLite, one home's folder (the one disk every process shares)."""
    if storage.dialect == "sqlite":
        yield BlobStore(tmp_path / "blobs"), BlobStore(tmp_path / "blobs")
        return
    one, two = await storage.open(CONTROL), await storage.open(CONTROL)
    try:
        yield BlobStore(tmp_path / "a", shared=one), BlobStore(tmp_path / "b", shared=two)
    finally:
        await one.close()
        await two.close()


async def test_a_blob_stored_on_one_node_is_found_on_the_other(
    nodes: tuple[BlobStore, BlobStore],
) -> None:
    a, b = nodes
    stored = await a.put(PNG, ".png")
    assert stored.name == hashlib.sha256(PNG).hexdigest() + ".png"
    another_machine(a, b)
    local = await b.ensure_local(stored)  # the path the other node recorded
    assert local.read_bytes() == PNG and local.parent.parent == b.root
    assert stat.S_IMODE(local.stat().st_mode) == 0o600
    assert await asyncio.to_thread(b.get, stored.name) == PNG
    assert await b.ensure_local(stored.name) == local  # found here now, by name too


async def test_a_blob_stored_nowhere_is_a_clear_not_found(
    nodes: tuple[BlobStore, BlobStore],
) -> None:
    _, b = nodes
    missing = hashlib.sha256(b"never stored").hexdigest() + ".txt"
    with pytest.raises(BlobNotFound, match=missing):
        await b.ensure_local(f"/elsewhere/blobs/{missing[:2]}/{missing}")
    with pytest.raises(BlobNotFound):
        await b.ensure_local("../../etc/passwd")


async def test_media_blocks_are_pointed_at_this_nodes_copy(
    nodes: tuple[BlobStore, BlobStore], storage: Storage
) -> None:
    a, b = nodes
    image = ImageBlock("image/png", blob=str(await a.put(PNG, ".png")), name="plot.png")
    pdf = await a.put(b"%PDF-1.4 one page", ".pdf")
    document = DocumentBlock("report.pdf", "application/pdf", blob=str(pdf))
    text = TextBlock("hello")
    another_machine(a, b)
    await b.localise([image, document, text])
    assert Path(image.blob).read_bytes() == PNG
    assert Path(document.blob).read_bytes() == b"%PDF-1.4 one page"
    if storage.dialect == "postgres":
        assert Path(image.blob).parent.parent == b.root


async def test_shared_rows_are_written_once_and_pruned_by_age(pg_url: str, tmp_path: Path) -> None:
    storage = PostgresStorage(pg_url)
    dbs = [await storage.open(CONTROL) for _ in range(3)]
    try:
        stores = [BlobStore(tmp_path / f"n{i}", shared=db) for i, db in enumerate(dbs)]
        # Three nodes storing the same bytes at once, each creating the table first.
        await asyncio.gather(*(store.put(PNG, ".png") for store in stores))
        await stores[0].put(PNG, ".jpg")  # another file name: a row of its own
        rows = await dbs[0].fetchall("SELECT digest, size FROM blobs ORDER BY digest")
        digest = hashlib.sha256(PNG).hexdigest()
        assert [(row["digest"], row["size"]) for row in rows] == [
            (f"{digest}.jpg", len(PNG)),
            (f"{digest}.png", len(PNG)),
        ]
        assert await stores[1].prune_shared(1) == 0
        await dbs[0].write(
            lambda conn: conn.execute(
                "UPDATE blobs SET created_at = 0 WHERE digest = ?", (f"{digest}.jpg",)
            )
        )
        assert await stores[1].prune_shared(1) == 1
    finally:
        for db in dbs:
            await db.close()


async def test_a_shared_copy_that_does_not_match_its_digest_is_refused(
    pg_url: str, tmp_path: Path
) -> None:
    db: Database = await PostgresStorage(pg_url).open(CONTROL)
    try:
        a = BlobStore(tmp_path / "a", shared=db)
        b = BlobStore(tmp_path / "b", shared=db)
        stored = await a.put(PNG, ".png")
        await db.write(lambda conn: conn.execute("UPDATE blobs SET data = ?", (b"tampered",)))
        another_machine(a, b)
        with pytest.raises(BlobNotFound, match="does not match"):
            await b.ensure_local(stored)
        assert not b.path_for(stored.name).exists()
    finally:
        await db.close()


async def test_a_moved_homes_blob_files_are_shared_once(pg_url: str, tmp_path: Path) -> None:
    # The files of an SQLite home, before its databases moved to PostgreSQL.
    before = BlobStore(tmp_path / "home" / "blobs")
    pdf = await before.put(b"%PDF-1.4 old report", ".pdf")
    png = await before.put(PNG, ".png")
    (png.parent / f".{png.name}.123.tmp").write_bytes(b"half written")
    db = await PostgresStorage(pg_url).open(CONTROL)
    try:
        moved = BlobStore(before.root, shared=db)
        assert await asyncio.to_thread(moved.share_folder) == 2
        assert await asyncio.to_thread(moved.share_folder) == 0  # already shared
        other = BlobStore(tmp_path / "other-node", shared=db)
        assert (await other.ensure_local(pdf)).read_bytes() == b"%PDF-1.4 old report"
        assert (await other.ensure_local(png.name)).read_bytes() == PNG
    finally:
        await db.close()


async def test_every_shared_blob_is_written_into_a_folder_by_its_own_name(
    pg_url: str, tmp_path: Path
) -> None:
    db = await PostgresStorage(pg_url).open(CONTROL)
    try:
        node = BlobStore(tmp_path / "node", shared=db)
        png = await node.put(PNG, ".png")
        pdf = await node.put(b"%PDF-1.4 report", ".pdf")
        back = BlobStore(tmp_path / "sqlite-home" / "blobs", shared=db)
        await back.put(PNG, ".png")  # already here: not written again
        assert await asyncio.to_thread(back.fetch_shared) == 1
        assert back.path_for(pdf.name).read_bytes() == b"%PDF-1.4 report"
        assert back.path_for(png.name).read_bytes() == PNG
        assert await asyncio.to_thread(back.fetch_shared) == 0
    finally:
        await db.close()
