"""usage.db: one row per successful model call, and one per paid generation or search.

The router's usage hook calls `record` with who the call was for (agent,
session, purpose); the cost is computed then, from config `pricing:` and the
built-in table, and stored with the row (NULL when the model is unpriced), so
later price changes never rewrite history; a call's hosted web searches and
fetches (llm/hosted.py) are counted on its row and their price is in its cost. A
generation (an image_generate or video_generate call) is a row of its own kind (its
`purpose`: image, video), with the tokens and the cost its provider reported (else
the tokens priced by the table, else NULL), shown by `totals` as "provider/model
[kind]"; a web search likewise (purpose search, no tokens, the cost its provider
reported). `totals` groups rows by model and agent for `habakkuk usage`. Sessions'
/model choices were kept here too; they live in state.db now, and the runtime moves
any left here when it opens.

`UsageAccess` is the Protocol of the usage ledger (habakkuk.services.usage.UsageLedger),
declared here beside `UsageTotal` so the chat commands and the server share it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from habakkuk.engine.sql import Conn, Schema
from habakkuk.engine.store import SqliteDatabase

from ..config import ModelRef
from ..store import Database, Migration
from .pricing import PriceTable
from .router import Caller
from .types import Usage

# The purposes of rows that are not model calls: each is its own line in the totals.
SERVICE_KINDS = ("image", "video", "search")
SEARCH_KIND = "search"

MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE calls (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            agent TEXT NOT NULL DEFAULT '',
            session TEXT NOT NULL DEFAULT '',
            purpose TEXT NOT NULL DEFAULT 'turn',
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL
        );
        CREATE INDEX calls_at ON calls(at);
        CREATE INDEX calls_session ON calls(session, at);
        CREATE TABLE session_models (
            session TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            set_at REAL NOT NULL
        );
        """,
    ),
    Migration(
        2,
        """
        ALTER TABLE calls ADD COLUMN web_searches INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE calls ADD COLUMN web_fetches INTEGER NOT NULL DEFAULT 0;
        """,
    ),
]

# PostgreSQL's own steps (engine/pg.py): numbered from 1, starting at the tables SQLite
# had reached when the port was made.
PG_MIGRATIONS: list[Migration] = []

SCHEMA = Schema("usage", MIGRATIONS, PG_MIGRATIONS)


@dataclass(frozen=True)
class UsageTotal:
    """Calls, tokens and dollars of one (model, agent) pair."""

    model: str
    agent: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    unpriced_calls: int
    # The provider's hosted web tool uses of those calls (their searches are in `cost`).
    web_searches: int = 0
    web_fetches: int = 0


class UsageAccess(Protocol):
    """Tokens and dollars of the home's model calls (habakkuk.services.usage.UsageLedger)."""

    async def usage_totals(
        self, *, days: float | None = None, agent: str | None = None, session: str | None = None
    ) -> list[UsageTotal]:
        """Totals by model and agent (over the last `days` when given)."""
        ...

    async def usage_since(self, since: float, *, agent: str | None = None) -> list[UsageTotal]:
        """Totals by model and agent since `since` (epoch seconds)."""
        ...

    def call_cost(self, model: str, usage: dict[str, Any]) -> float | None:
        """Dollars of one model call, None when unpriced."""
        ...


class UsageStore:
    """The usage database of one home."""

    def __init__(self, db: Database, prices: PriceTable):
        self.db = db
        self.prices = prices

    @classmethod
    async def open(cls, path: Path, prices: PriceTable | None = None) -> UsageStore:
        """Open (and migrate) usage.db."""
        return cls(await SqliteDatabase.open(path, MIGRATIONS), prices or PriceTable())

    async def close(self) -> None:
        await self.db.close()

    async def record(
        self, ref: ModelRef, caller: Caller, usage: Usage, *, at: float | None = None
    ) -> float | None:
        """Store one successful call; returns its cost in dollars (None: unpriced)."""
        cost = self.prices.cost(ref.model, usage)
        await self._insert(at, ref, caller, caller.purpose, usage, cost)
        return cost

    async def record_generation(
        self,
        kind: str,
        ref: ModelRef,
        caller: Caller,
        usage: Usage,
        *,
        cost: float | None = None,
        at: float | None = None,
    ) -> float | None:
        """Store one paid generation as its own kind (a row whose purpose is `kind`): the
        cost the provider reported, else its tokens priced by the table (None: unknown)."""
        if cost is None and usage.prompt_tokens + usage.output_tokens > 0:
            cost = self.prices.cost(ref.model, usage)
        await self._insert(at, ref, caller, kind, usage, cost)
        return cost

    async def _insert(
        self,
        at: float | None,
        ref: ModelRef,
        caller: Caller,
        purpose: str,
        usage: Usage,
        cost: float | None,
    ) -> None:
        """One row of calls, a model call's or a generation's (whose purpose is its kind)."""
        row = (
            time.time() if at is None else at,
            ref.provider,
            ref.model,
            caller.agent,
            caller.session,
            purpose,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            cost,
            usage.web_search_requests,
            usage.web_fetch_requests,
        )

        def _write(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO calls (at, provider, model, agent, session, purpose, input_tokens,"
                " output_tokens, cache_read_tokens, cache_write_tokens, cost, web_searches,"
                " web_fetches) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

        await self.db.write(_write)

    async def totals(
        self,
        *,
        since: float | None = None,
        agent: str | None = None,
        session: str | None = None,
    ) -> list[UsageTotal]:
        """Totals by model and agent, the most expensive first."""
        where: list[str] = ["1=1"]
        params: list[float | str] = []
        if since is not None:
            where.append("at >= ?")
            params.append(since)
        if agent is not None:
            where.append("agent = ?")
            params.append(agent)
        if session is not None:
            where.append("session = ?")
            params.append(session)
        kinds = ", ".join(f"'{k}'" for k in SERVICE_KINDS)
        label = (
            f"provider || '/' || model || CASE WHEN purpose IN ({kinds})"
            " THEN ' [' || purpose || ']' ELSE '' END"
        )
        rows = await self.db.fetchall(
            f"SELECT {label} AS model, agent, COUNT(*) AS calls,"
            " SUM(input_tokens) AS i, SUM(output_tokens) AS o, SUM(cache_read_tokens) AS r,"
            " SUM(cache_write_tokens) AS w, COALESCE(SUM(cost), 0) AS cost,"
            " SUM(cost IS NULL) AS unpriced, SUM(web_searches) AS searches,"
            " SUM(web_fetches) AS fetches"
            f" FROM calls WHERE {' AND '.join(where)}"
            f" GROUP BY {label}, agent ORDER BY cost DESC, calls DESC, model, agent",
            params,
        )
        return [
            UsageTotal(
                model=row["model"],
                agent=row["agent"],
                calls=row["calls"],
                input_tokens=row["i"],
                output_tokens=row["o"],
                cache_read_tokens=row["r"],
                cache_write_tokens=row["w"],
                cost=float(row["cost"]),
                unpriced_calls=row["unpriced"],
                web_searches=row["searches"],
                web_fetches=row["fetches"],
            )
            for row in rows
        ]

    # -- /model choices of older versions ------------------------------------------------

    async def legacy_session_models(self) -> dict[str, str]:
        """/model choices stored here before they moved to state.db (session -> model)."""
        rows = await self.db.fetchall("SELECT session, model FROM session_models")
        return {str(row["session"]): str(row["model"]) for row in rows}

    async def forget_legacy_session_models(self, sessions: list[str]) -> None:
        """Drop those choices once state.db holds them."""
        await self.db.write(
            lambda conn: conn.executemany(
                "DELETE FROM session_models WHERE session = ?", [(s,) for s in sessions]
            )
        )

    async def prune(self, older_than_days: float) -> int:
        """Delete call rows older than that many days (retention); returns how many."""
        cutoff = time.time() - older_than_days * 86_400

        def _prune(conn: Conn) -> int:
            return int(conn.execute("DELETE FROM calls WHERE at < ?", (cutoff,)).rowcount)

        return await self.db.write(_prune)
