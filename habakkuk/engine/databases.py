"""The home's shared databases, opened together on the storage the config names."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .jobs import SCHEMA as CONTROL
from .llm.pricing import PriceTable
from .llm.usage import SCHEMA as USAGE
from .llm.usage import UsageStore
from .nodes import check_clock
from .sessions import TranscriptStore
from .sql import Database
from .state import SCHEMA as STATE
from .state import StateStore
from .storage import Storage, open_storage

if TYPE_CHECKING:
    from .config import Config
    from .home import Home


@dataclass
class HomeDatabases:
    """control (the queue, leases, channels, schedules, board), state, transcripts and
    usage, on one `storage`."""

    storage: Storage
    control: Database
    state: StateStore
    transcripts: TranscriptStore
    usage: UsageStore


async def open_databases(home: Home, config: Config) -> HomeDatabases:
    """Open (and migrate) the home's databases where `config` says; ConfigError when a
    configured PostgreSQL cannot be used. What opened before a failure is closed."""
    storage = await asyncio.to_thread(open_storage, home, config)
    opened: list[Database] = []
    try:
        control = await storage.open(CONTROL, inline=True)
        opened.append(control)
        await check_clock(control)  # a machine whose clock is off cannot hold leases
        # state first: transcripts' connection attaches it (a turn's opening
        # transaction reads the session's state too).
        state = await storage.open(STATE)
        opened.append(state)
        transcripts = await TranscriptStore.open_on(storage)
        opened.append(transcripts.db)
        usage = await storage.open(USAGE)
    except BaseException:
        for db in opened:
            with contextlib.suppress(Exception):
                await db.close()
        raise
    return HomeDatabases(
        storage,
        control,
        StateStore(state),
        transcripts,
        UsageStore(usage, PriceTable(config.pricing), free=login_providers(config)),
    )


def login_providers(config: Config) -> frozenset[str]:
    """The providers that sign in with a subscription login: their calls cost $0."""
    return frozenset(name for name, p in config.providers.items() if p.auth is not None)
