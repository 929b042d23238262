"""The doctor's line for `nodes:`: how many devices are paired and how many are online
now (spec 000 "Device nodes"). A `nodes:` section without `http:` never gets here: the
config is refused, naming the file and line."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Home

# (status, name, detail): doctor.py makes each a Check (no import back: no cycle).
Found = tuple[Literal["ok", "WARN", "FAIL"], str, str]
NAME = "nodes"


async def nodes_checks(config: Config, home: Home, now: float | None = None) -> list[Found]:
    """Nothing without the section; else the paired and online counts from nodes.db (a
    node is online while a process holds it and its heartbeat is fresh)."""
    section = config.nodes
    if section is None:
        return []
    from habakkuk.engine.storage import open_storage
    from habakkuk.protocols.nodes.store import NodeStore

    try:
        store = await NodeStore.open_on(open_storage(home, config))
        try:
            records = await store.nodes()
        finally:
            await store.close()
    except Exception as exc:  # a locked or unreachable database: say which, never crash
        return [("FAIL", NAME, t("cli.doctor.nodes_unreadable", error=str(exc)))]
    if not records:
        return [("WARN", NAME, t("cli.doctor.nodes_none"))]
    at = time.time() if now is None else now
    fresh = 2 * section.heartbeat_seconds + 5
    online = sum(1 for r in records if r.holder and at - r.last_seen <= fresh)
    detail = t("cli.doctor.nodes_counts", paired=len(records), online=online, url=section.url)
    return [("ok", NAME, detail)]
