"""Every table these stores keep has the same columns on PostgreSQL as on SQLite, so
`habakkuk storage migrate` can copy each table by column name, either way."""

from __future__ import annotations

from pathlib import Path

from habakkuk.channels.store import ChannelStore
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.llm.usage import SCHEMA as USAGE
from habakkuk.engine.sql import Database, Schema
from habakkuk.engine.storage import PostgresStorage, SqliteStorage, Storage
from habakkuk.server.webstore import SCHEMA as WEB

CHANNEL_TABLES = (
    "channel_status",
    "channel_leases",
    "channel_offsets",
    "reply_sweep",
    "channel_seen",
    "channel_allow",
    "channel_pairing",
    "channel_bindings",
    "delivery_chunks",
    "delivery_attempts",
    "channel_prompts",
    "channel_drafts",
)


async def _columns(db: Database, table: str) -> set[str]:
    if db.dialect == "sqlite":
        rows = await db.fetchall(f"PRAGMA table_info({table})")
        return {str(row["name"]) for row in rows}
    rows = await db.fetchall(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = ?",
        (table,),
    )
    return {str(row[0]) for row in rows}


async def _tables_of(
    storage: Storage, schema: Schema, tables: tuple[str, ...]
) -> dict[str, set[str]]:
    db = await storage.open(schema)
    try:
        if schema is CONTROL:
            await ChannelStore.open(db)
        return {table: await _columns(db, table) for table in tables}
    finally:
        await db.close()


async def test_the_channel_web_and_usage_tables_have_the_same_columns_on_both_engines(
    pg_url: str, tmp_path: Path
) -> None:
    home = Home(tmp_path / "home")
    home.prepare()
    lite, pg = SqliteStorage(home), PostgresStorage(pg_url)
    web_tables = ("conversations", "events", "pending_turns", "api_users", "api_keys", "responses")
    for schema, tables in (
        (CONTROL, CHANNEL_TABLES),
        (WEB, web_tables),
        (USAGE, ("calls", "session_models")),
    ):
        on_sqlite = await _tables_of(lite, schema, tables)
        on_postgres = await _tables_of(pg, schema, tables)
        for table in tables:
            extra = {"rowid"} if table == "conversations" else set()  # SQLite's is implicit
            assert on_sqlite[table], table
            assert on_postgres[table] == on_sqlite[table] | extra, table
