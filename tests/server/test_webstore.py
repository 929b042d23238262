"""web.db: idempotent appends, growing sequence numbers, bounded retention."""

from __future__ import annotations

import time
from pathlib import Path

from habakkuk.server.webstore import WebStore


async def test_appends_are_idempotent_and_sequence_numbers_only_grow(tmp_path: Path) -> None:
    store = await WebStore.open(tmp_path / "web.db")
    try:
        await store.bind("c", "main", "ses_1")
        first, created = await store.append("c", "user", "hi", dedupe="in:c:1", turn="t1")
        again, created_again = await store.append("c", "user", "hi", dedupe="in:c:1", turn="t1")
        assert created and not created_again
        assert again.seq == first.seq
        second, _ = await store.append("other", "user", "x")
        third, _ = await store.append("c", "assistant", "hello", turn="t1")
        assert first.seq < second.seq < third.seq
        assert [e.seq for e in await store.events("c")] == [first.seq, third.seq]
        assert [e.seq for e in await store.events("c", after=first.seq)] == [third.seq]
    finally:
        await store.close()


async def test_retention_drops_old_keys_first_and_old_messages_later(tmp_path: Path) -> None:
    store = await WebStore.open(tmp_path / "web.db")
    try:
        await store.bind("c", "main", "ses_1")
        await store.append("c", "user", "hi", turn="t1")
        await store.remember_api_key("key", "ses_1", "t1")
        await store.remember_response("resp_1", "ses_1", "main")
        now = time.time()
        await store.prune(now + 8 * 86400)
        assert await store.api_key("key") is None
        assert len(await store.events("c")) == 1
        assert await store.response("resp_1") == ("ses_1", "main")
        await store.prune(now + 200 * 86400)
        assert await store.events("c") == []
        assert await store.response("resp_1") is None
        assert await store.conversation("c") is None
    finally:
        await store.close()
