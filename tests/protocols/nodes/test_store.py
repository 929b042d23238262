"""nodes.db on both engines: codes work once and expire, secrets are checked by hash,
a revoke deletes the node."""

from __future__ import annotations

import time

from habakkuk.engine.storage import Storage
from habakkuk.protocols.nodes.store import NodeStore, digest


async def test_the_node_store_pairs_checks_and_revokes_on_each_engine(storage: Storage) -> None:
    store = await NodeStore.open_on(storage)
    try:
        now = time.time()
        code = await store.new_code(600, now=now)
        secret = await store.redeem(code.code, "phone", "android", ["system.notify"], now=now)
        assert secret is not None
        assert await store.redeem(code.code, "phone", "android", [], now=now) is None  # once
        expired = await store.new_code(10, now=now)
        assert await store.redeem(expired.code, "tab", "", [], now=now + 11) is None
        found = await store.check("phone", secret)
        assert found is not None and found.caps == ("system.notify",)
        assert found.secret_hash == digest(secret)
        assert await store.check("phone", secret + "x") is None
        await store.seen("phone", "android-14", ["location.get"], now + 5, "host:1:a")
        assert [(n.name, n.platform, n.caps, n.holder) for n in await store.nodes()] == [
            ("phone", "android-14", ("location.get",), "host:1:a")
        ]
        # Another process's let-go does not clear this holder; its own does.
        await store.let_go("phone", "host:2:b")
        assert [n.holder for n in await store.nodes()] == ["host:1:a"]
        await store.let_go("phone", "host:1:a")
        assert [n.holder for n in await store.nodes()] == [""]
        assert await store.revoke("phone")
        assert not await store.revoke("phone")
        assert await store.check("phone", secret) is None
    finally:
        await store.close()
