"""nodes.db: the paired device nodes and the one-time pairing codes.

- `nodes`: one row per paired node: its name, platform, capabilities (as last offered),
  the SHA-256 of its secret (the secret itself stays on the device), when it was paired
  and last seen, and which process holds its connection now (`holder`). Pairing a name
  again replaces the row (and so the old secret).
- `pair_codes`: the SHA-256 of each unused pairing code and when it expires; a code is
  deleted as it is redeemed, so it works once.

Opened like every home database (engine/storage.py): SQLite `nodes.db`, or the `nodes`
schema on PostgreSQL, with its migrations.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from habakkuk.engine.sql import Conn, Database, Migration, Row, Schema

if TYPE_CHECKING:
    from habakkuk.engine.storage import Storage

# The process holding the node's connection now (its job queue's pin, jobs.JobQueue.node;
# '' when none): where another process's node_invoke is sent (relay.py).
HOLDER_DDL = "ALTER TABLE nodes ADD COLUMN holder TEXT NOT NULL DEFAULT ''"

MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE nodes (
            name TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            caps TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            paired_at REAL NOT NULL,
            last_seen REAL NOT NULL
        );
        CREATE TABLE pair_codes (
            code_hash TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        );
        """,
    ),
    Migration(2, HOLDER_DDL),
]
PG_MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE nodes (
            name TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            caps TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            paired_at DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE pair_codes (
            code_hash TEXT PRIMARY KEY,
            expires_at DOUBLE PRECISION NOT NULL
        );
        """,
    ),
    Migration(2, HOLDER_DDL),
]
SCHEMA = Schema("nodes", MIGRATIONS, PG_MIGRATIONS)

# Ten characters from 31 letters and digits that cannot be mistaken for one another.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 10


def digest(text: str) -> str:
    """The SHA-256 (hex) a code or secret is stored as."""
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def normal_code(code: str) -> str:
    """A code as typed (spaces, dashes, lower case) in its stored form."""
    return "".join(ch for ch in code.upper() if ch.isalnum())


@dataclass(frozen=True)
class PairCode:
    """A fresh one-time pairing code and when it expires (epoch seconds)."""

    code: str
    expires: float


@dataclass(frozen=True)
class NodeRecord:
    """A paired node as nodes.db holds it."""

    name: str
    platform: str
    caps: tuple[str, ...]
    secret_hash: str
    paired_at: float
    last_seen: float
    holder: str = ""


def _record(row: Row) -> NodeRecord:
    caps = json.loads(row["caps"])
    return NodeRecord(
        row["name"],
        row["platform"],
        tuple(str(cap) for cap in caps),
        row["secret_hash"],
        float(row["paired_at"]),
        float(row["last_seen"]),
        str(row["holder"] or ""),
    )


class NodeStore:
    """nodes.db's reads and writes."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open_on(cls, storage: Storage) -> NodeStore:
        """Open (and migrate) the home's nodes database on `storage`."""
        return cls(await storage.open(SCHEMA))

    async def close(self) -> None:
        """Close the database."""
        await self.db.close()

    async def new_code(self, ttl: float, now: float | None = None) -> PairCode:
        """A new one-time code valid for `ttl` seconds; only its hash is stored."""
        at = time.time() if now is None else now
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        expires = at + ttl

        def write(conn: Conn) -> None:
            conn.execute("DELETE FROM pair_codes WHERE expires_at <= ?", (at,))
            conn.execute(
                "INSERT INTO pair_codes (code_hash, expires_at) VALUES (?, ?)",
                (digest(code), expires),
            )

        await self.db.write(write)
        return PairCode(code, expires)

    async def redeem(
        self, code: str, name: str, platform: str, caps: Sequence[str], now: float | None = None
    ) -> str | None:
        """Use `code` up and pair `name` with a fresh 256-bit secret (replacing any node of
        that name): the secret, which is never stored; None when the code is unknown, used
        or expired."""
        at = time.time() if now is None else now
        secret = secrets.token_urlsafe(32)
        hashed = digest(normal_code(code))

        def write(conn: Conn) -> bool:
            found = conn.execute(
                "DELETE FROM pair_codes WHERE code_hash = ? RETURNING expires_at", (hashed,)
            ).fetchone()
            if found is None or float(found[0]) <= at:
                return False
            conn.execute("DELETE FROM nodes WHERE name = ?", (name,))
            conn.execute(
                "INSERT INTO nodes (name, platform, caps, secret_hash, paired_at, last_seen)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (name, platform, json.dumps(list(caps)), digest(secret), at, at),
            )
            return True

        return secret if await self.db.write(write) else None

    async def get(self, name: str) -> NodeRecord | None:
        """The node called `name`, or None."""
        row = await self.db.fetchone("SELECT * FROM nodes WHERE name = ?", (name,))
        return None if row is None else _record(row)

    async def check(self, name: str, secret: str) -> NodeRecord | None:
        """The node when `secret` is its secret (compared by hash in constant time)."""
        found = await self.get(name)
        if found is None or not hmac.compare_digest(found.secret_hash, digest(secret)):
            return None
        return found

    async def nodes(self) -> list[NodeRecord]:
        """Every paired node, by name."""
        rows = await self.db.fetchall("SELECT * FROM nodes ORDER BY name")
        return [_record(row) for row in rows]

    async def seen(
        self, name: str, platform: str, caps: Sequence[str], at: float, holder: str = ""
    ) -> None:
        """Record what a node offers as it connects, when, and the process holding it."""
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE nodes SET platform = ?, caps = ?, last_seen = ?, holder = ? WHERE name = ?",
                (platform, json.dumps(list(caps)), at, holder, name),
            )
        )

    async def let_go(self, name: str, holder: str) -> None:
        """The connection `holder` held ended: the node is held nowhere (unless another
        process took it since)."""
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE nodes SET holder = '' WHERE name = ? AND holder = ?", (name, holder)
            )
        )

    async def touch(self, name: str, at: float) -> None:
        """A live node's heartbeat."""
        await self.db.write(
            lambda conn: conn.execute("UPDATE nodes SET last_seen = ? WHERE name = ?", (at, name))
        )

    async def revoke(self, name: str) -> bool:
        """Delete the node (its secret stops working); False when there was none."""
        cursor = await self.db.write(
            lambda conn: conn.execute("DELETE FROM nodes WHERE name = ?", (name,))
        )
        return cursor.rowcount > 0
