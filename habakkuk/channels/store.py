"""The channels' tables in control.db: health, leases, offsets, allowlist, bindings, progress.

control.db is shared by every process of a home, so everything here is a
single statement or a short transaction on the queue's own connection: a
second process sees the same bindings, pairings and delivery progress.
The tables are created with IF NOT EXISTS when channels start, and columns
added since are added to an existing file then (the jobs module owns
control.db's numbered migrations). On PostgreSQL they are the same tables, in the
control schema, with PostgreSQL's types (PG_SCHEMA); the column `user` is a reserved
word there, so every statement quotes it ("user" names the column on both engines).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from habakkuk.engine.jobs import Lease
from habakkuk.engine.leases import NamedLeases
from habakkuk.engine.sql import Conn, Row
from habakkuk.engine.store import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS channel_status (
    account TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    holder TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    since REAL NOT NULL,
    last_beat REAL,
    restarts INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    last_in REAL,
    last_out REAL,
    last_error TEXT NOT NULL DEFAULT '',
    last_error_at REAL
);
CREATE TABLE IF NOT EXISTS channel_leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    until REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS channel_offsets (
    account TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- How far the reply sweep has read finished turns (channels/sweep.py): one row per turn kind.
CREATE TABLE IF NOT EXISTS reply_sweep (
    kind TEXT PRIMARY KEY,
    updated_at REAL NOT NULL,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS channel_seen (
    account TEXT NOT NULL,
    key TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (account, key)
);
-- Each inbound message prunes the keys older than a week: by time, not a scan of the week.
CREATE INDEX IF NOT EXISTS channel_seen_at ON channel_seen(at);
CREATE TABLE IF NOT EXISTS channel_allow (
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    how TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (account, user)
);
CREATE TABLE IF NOT EXISTS channel_pairing (
    code TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    user TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS channel_bindings (
    conversation TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    agent_override TEXT NOT NULL DEFAULT '',
    last_active REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS delivery_chunks (
    delivery TEXT NOT NULL,
    idx INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (delivery, idx)
);
-- A send of a chunk that started (written before it, by the lease owner that sent it):
-- a chunk with an attempt and no row in delivery_chunks may have reached the chat.
CREATE TABLE IF NOT EXISTS delivery_attempts (
    delivery TEXT NOT NULL,
    idx INTEGER NOT NULL,
    owner TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (delivery, idx, owner)
);
CREATE TABLE IF NOT EXISTS channel_prompts (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn TEXT NOT NULL,
    nonce TEXT NOT NULL UNIQUE,
    choices TEXT NOT NULL DEFAULT '[]',
    answer TEXT,
    by TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    agent TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS channel_drafts (
    turn TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    message_id TEXT NOT NULL,
    at REAL NOT NULL
);
"""

# The same tables on PostgreSQL (same names and columns; times DOUBLE PRECISION), but
# channel_leases, which NamedLeases creates for its engine (engine/leases.py).
PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS channel_status (
    account TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    holder TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    since DOUBLE PRECISION NOT NULL,
    last_beat DOUBLE PRECISION,
    restarts BIGINT NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL,
    last_in DOUBLE PRECISION,
    last_out DOUBLE PRECISION,
    last_error TEXT NOT NULL DEFAULT '',
    last_error_at DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS channel_offsets (
    account TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reply_sweep (
    kind TEXT PRIMARY KEY,
    updated_at DOUBLE PRECISION NOT NULL,
    seq BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS channel_seen (
    account TEXT NOT NULL,
    key TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (account, key)
);
CREATE INDEX IF NOT EXISTS channel_seen_at ON channel_seen(at);
CREATE TABLE IF NOT EXISTS channel_allow (
    account TEXT NOT NULL,
    "user" TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    how TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (account, "user")
);
CREATE TABLE IF NOT EXISTS channel_pairing (
    code TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    "user" TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL,
    expires DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS channel_bindings (
    conversation TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    agent_override TEXT NOT NULL DEFAULT '',
    last_active DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS channel_bindings_session ON channel_bindings(session, last_active);
CREATE TABLE IF NOT EXISTS delivery_chunks (
    delivery TEXT NOT NULL,
    idx BIGINT NOT NULL,
    message_id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (delivery, idx)
);
CREATE TABLE IF NOT EXISTS delivery_attempts (
    delivery TEXT NOT NULL,
    idx BIGINT NOT NULL,
    owner TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (delivery, idx, owner)
);
CREATE TABLE IF NOT EXISTS channel_prompts (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn TEXT NOT NULL,
    nonce TEXT NOT NULL UNIQUE,
    choices TEXT NOT NULL DEFAULT '[]',
    answer TEXT,
    by TEXT NOT NULL DEFAULT '',
    created DOUBLE PRECISION NOT NULL,
    tool TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    agent TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS channel_drafts (
    turn TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    message_id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL
);
"""

# Columns added after the first release: (table, column, SQLite declaration, PostgreSQL
# declaration). `ensure` adds whichever an existing control.db lacks (CREATE TABLE IF NOT
# EXISTS keeps old tables). A time is DOUBLE PRECISION on PostgreSQL: its REAL has too few
# digits for epoch seconds.
_TEXT = "TEXT NOT NULL DEFAULT ''"
ADDED_COLUMNS = [
    ("channel_prompts", "tool", _TEXT, _TEXT),
    ("channel_prompts", "summary", _TEXT, _TEXT),
    ("channel_prompts", "reason", _TEXT, _TEXT),
    ("channel_prompts", "agent", _TEXT, _TEXT),
    ("channel_prompts", "session", _TEXT, _TEXT),
    ("channel_status", "last_in", "REAL", "DOUBLE PRECISION"),
    ("channel_status", "last_out", "REAL", "DOUBLE PRECISION"),
    ("channel_status", "last_error", _TEXT, _TEXT),
    ("channel_status", "last_error_at", "REAL", "DOUBLE PRECISION"),
]

PAIRING_SECONDS = 3600.0
SEEN_KEEP_SECONDS = 7 * 86400.0
# Pairing codes avoid look-alike characters (0/O, 1/I/L).
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"


@dataclass
class ChannelStatus:
    """One account's row of channel_status, as its holder last recorded it."""

    account: str
    type: str
    state: str
    holder: str
    detail: str
    since: float
    last_beat: float | None
    restarts: int
    updated_at: float
    last_in: float | None = None  # the last message the platform brought in
    last_out: float | None = None  # the last chunk or file sent out
    last_error: str = ""  # kept until a newer error replaces it (channels/health.py)
    last_error_at: float | None = None


@dataclass(frozen=True)
class Activity:
    """What an account did since its holder last wrote it down (None: nothing new)."""

    beat: float | None = None
    last_in: float | None = None
    last_out: float | None = None
    error: str = ""
    error_at: float | None = None


@dataclass
class Pairing:
    code: str
    account: str
    user: str
    name: str
    address: str
    expires: float


@dataclass
class Prompt:
    """An approval or a question waiting for an answer in one conversation."""

    id: str
    kind: str  # approval | question
    conversation: str
    turn: str
    nonce: str
    choices: list[str]
    answer: str | None
    by: str
    created: float
    # What an approval is about, so other processes can show and answer it.
    tool: str = ""
    summary: str = ""
    reason: str = ""  # a reviewer's doubt, when it had one
    agent: str = ""
    session: str = ""


PROMPT_SECONDS = 900.0


# An approval prompt nobody answered in time whose turn still runs (one parameter: the
# oldest creation time still valid).
_WAITING_APPROVAL = (
    "p.kind = 'approval' AND p.answer IS NULL AND p.created >= ?"
    " AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = p.turn AND j.status = 'running')"
)


def _columns(conn: Conn, table: str, *, postgres: bool) -> set[str]:
    """The column names `table` has now, from each engine's catalogue."""
    if postgres:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        )
        return {str(row[0]) for row in rows}
    return {str(row["name"]) for row in conn.execute(f"PRAGMA table_info({table})")}


def _prompt(row: Row) -> Prompt:
    data = dict(row)
    data["choices"] = json.loads(data["choices"])
    return Prompt(**data)


@dataclass(frozen=True, order=True)
class SweepMark:
    """A place in the finished jobs, in the order the reply sweep reads them: every job
    finished at or before it (by `updated_at`, then `seq`) has been looked at."""

    updated_at: float
    seq: int


@dataclass(frozen=True)
class SendProgress:
    """Where a delivery's sends stand as it (re)starts (ChannelStore.begin_send)."""

    sent: dict[int, str]  # chunk -> the platform's message id
    attempted: dict[int, float]  # unrecorded chunk whose send started -> its first start
    started: int | None  # the chunk whose send was noted as starting now (None: all sent)


@dataclass
class Binding:
    conversation: str
    session: str
    agent_override: str
    last_active: float


class ChannelStore:
    """Typed access to the channel tables of one control.db."""

    def __init__(self, db: Database):
        self.db = db
        self.leases = NamedLeases(db, "channel_leases")

    @classmethod
    async def open(cls, db: Database) -> ChannelStore:
        """A store on `db` with its tables created if needed."""
        store = cls(db)
        await store.ensure()
        return store

    async def ensure(self) -> None:
        """Create the tables if needed (idempotent; safe with other processes)."""
        postgres = self.db.dialect == "postgres"

        def _create(conn: Conn) -> None:
            conn.executescript(PG_SCHEMA if postgres else SCHEMA)

        def _upgrade(conn: Conn) -> None:
            # Inside the writer lock, so two processes upgrading at once add each column
            # once; the columns are looked up first, as an ALTER locks its table even when
            # it has nothing to add.
            for table, column, lite, pg in ADDED_COLUMNS:
                declaration = pg if postgres else lite
                if column not in _columns(conn, table, postgres=postgres):
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

        if postgres:
            # Under the schema's writer lock: two nodes creating at once would race on
            # PostgreSQL's catalog (CREATE ... IF NOT EXISTS is not atomic there).
            await self.db.write(_create)
        else:
            await self.db.run(_create)
        await self.db.write(_upgrade)
        await self.leases.ensure()

    # -- named leases (one poller per channel account) -------------------------------

    async def acquire_lease(self, name: str, owner: str, seconds: float) -> str | None:
        """Take or renew lease `name`; returns None when we hold it, else the holder.

        A lease held by a dead process on this host is taken at once; any other is
        taken when it runs out (engine/leases.py).
        """
        return await self.leases.acquire(name, owner, seconds)

    async def release_lease(self, name: str, owner: str) -> None:
        await self.leases.release(name, owner)

    async def lease_holder(self, name: str) -> str | None:
        return await self.leases.holder(name)

    # -- health ----------------------------------------------------------------------

    async def set_status(
        self,
        account: str,
        type_: str,
        state: str,
        *,
        holder: str = "",
        detail: str = "",
        restarted: bool = False,
        error: str = "",
    ) -> None:
        """Record an adapter's state; `since` moves only when the state changes. An
        `error` (why the adapter stopped) becomes the account's last error, now."""

        def _set(conn: Conn) -> None:
            now = time.time()
            error_at = now if error else None
            conn.execute(
                "INSERT INTO channel_status(account, type, state, holder, detail, since,"
                " restarts, updated_at, last_error, last_error_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(account) DO UPDATE SET type = excluded.type,"
                " since = CASE WHEN channel_status.state = excluded.state"
                " THEN channel_status.since ELSE excluded.since END,"
                " state = excluded.state, holder = excluded.holder, detail = excluded.detail,"
                " restarts = channel_status.restarts + ?, updated_at = excluded.updated_at,"
                " last_error = CASE WHEN excluded.last_error_at IS NULL"
                " THEN channel_status.last_error ELSE excluded.last_error END,"
                " last_error_at = COALESCE(excluded.last_error_at, channel_status.last_error_at)",
                (
                    account, type_, state, holder, detail, now, int(restarted), now,
                    error, error_at, int(restarted),
                ),
            )  # fmt: skip

        await self.db.write(_set)

    async def beat(self, account: str, at: float) -> None:
        """Record the account's last keepalive (`record` says more in one write)."""
        await self.record(account, Activity(beat=at))

    async def record(self, account: str, activity: Activity) -> None:
        """Write what an account did since the last write, in one statement: each time
        given replaces the recorded one, an error replaces the last error."""
        error = activity.error or None
        error_at = activity.error_at if error else None

        def _record(conn: Conn) -> None:
            conn.execute(
                "UPDATE channel_status SET updated_at = ?,"
                " last_beat = COALESCE(?, last_beat), last_in = COALESCE(?, last_in),"
                " last_out = COALESCE(?, last_out), last_error = COALESCE(?, last_error),"
                " last_error_at = COALESCE(?, last_error_at) WHERE account = ?",
                (
                    time.time(), activity.beat, activity.last_in, activity.last_out,
                    error, error_at, account,
                ),
            )  # fmt: skip

        await self.db.run(_record)

    async def live_holders(self) -> dict[str, str]:
        """The account each live process holds (`channel:<account>` leases), by account."""
        held = await self.leases.live_holders()
        prefix = "channel:"
        return {
            name.removeprefix(prefix): owner
            for name, owner in held.items()
            if name.startswith(prefix)
        }

    async def statuses(self) -> dict[str, ChannelStatus]:
        rows = await self.db.fetchall("SELECT * FROM channel_status ORDER BY account")
        return {r["account"]: ChannelStatus(**dict(r)) for r in rows}

    # -- receive position --------------------------------------------------------------

    async def offset(self, account: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT value FROM channel_offsets WHERE account = ?", (account,)
        )
        return str(row["value"]) if row else None

    async def save_offset(self, account: str, value: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO channel_offsets(account, value) VALUES (?, ?)"
                " ON CONFLICT(account) DO UPDATE SET value = excluded.value",
                (account, value),
            )
        )

    # -- the reply sweep's place ---------------------------------------------------------

    async def sweep_mark(self, kind: str) -> SweepMark | None:
        """How far the reply sweep of turn kind `kind` has read (None: never swept)."""
        row = await self.db.fetchone(
            "SELECT updated_at, seq FROM reply_sweep WHERE kind = ?", (kind,)
        )
        return SweepMark(float(row["updated_at"]), int(row["seq"])) if row else None

    async def save_sweep_mark(self, kind: str, mark: SweepMark) -> None:
        """Record the sweep's place; it only moves forward (two processes may sweep)."""
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO reply_sweep(kind, updated_at, seq) VALUES (?, ?, ?)"
                " ON CONFLICT(kind) DO UPDATE SET updated_at = excluded.updated_at,"
                " seq = excluded.seq WHERE (excluded.updated_at, excluded.seq)"
                " > (reply_sweep.updated_at, reply_sweep.seq)",
                (kind, mark.updated_at, mark.seq),
            )
        )

    # -- redelivery ----------------------------------------------------------------------

    async def seen(self, account: str, key: str) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 FROM channel_seen WHERE account = ? AND key = ?", (account, key)
        )
        return row is not None

    async def mark_seen(self, account: str, key: str) -> None:
        def _mark(conn: Conn) -> None:
            now = time.time()
            conn.execute(
                "INSERT OR IGNORE INTO channel_seen(account, key, at) VALUES (?, ?, ?)",
                (account, key, now),
            )
            conn.execute("DELETE FROM channel_seen WHERE at < ?", (now - SEEN_KEEP_SECONDS,))

        await self.db.write(_mark)

    # -- who may talk ----------------------------------------------------------------------

    async def allowed_user(self, account: str, user: str) -> str | None:
        """How a user was let in by pairing ("paired"), or None."""
        row = await self.db.fetchone(
            'SELECT how FROM channel_allow WHERE account = ? AND "user" = ?', (account, user)
        )
        return str(row["how"]) if row else None

    async def pairing_for(self, account: str, user: str, name: str, address: str) -> Pairing:
        """The user's open pairing code, or a new one valid for an hour."""

        def _code(conn: Conn) -> Pairing:
            now = time.time()
            conn.execute("DELETE FROM channel_pairing WHERE expires < ?", (now,))
            row = conn.execute(
                'SELECT * FROM channel_pairing WHERE account = ? AND "user" = ?', (account, user)
            ).fetchone()
            if row is not None:
                return Pairing(**dict(row))
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))
            pairing = Pairing(code, account, user, name, address, now + PAIRING_SECONDS)
            conn.execute(
                'INSERT INTO channel_pairing(code, account, "user", name, address, expires)'
                " VALUES (?, ?, ?, ?, ?, ?)",
                (code, account, user, name, address, pairing.expires),
            )
            return pairing

        return await self.db.write(_code)

    async def approve_pairing(self, code: str) -> Pairing | None:
        """Let the code's user in for good; None when the code is unknown or expired."""

        def _approve(conn: Conn) -> Pairing | None:
            now = time.time()
            row = conn.execute(
                "SELECT * FROM channel_pairing WHERE code = ? AND expires >= ?",
                (code.strip().upper(), now),
            ).fetchone()
            if row is None:
                return None
            pairing = Pairing(**dict(row))
            conn.execute(
                'INSERT INTO channel_allow(account, "user", name, how, at) VALUES (?, ?, ?, ?, ?)'
                ' ON CONFLICT(account, "user") DO UPDATE SET how = excluded.how',
                (pairing.account, pairing.user, pairing.name, "paired", now),
            )
            conn.execute("DELETE FROM channel_pairing WHERE code = ?", (pairing.code,))
            return pairing

        return await self.db.write(_approve)

    # -- conversations -> sessions -----------------------------------------------------------

    async def binding(self, conversation: str) -> Binding | None:
        row = await self.db.fetchone(
            "SELECT * FROM channel_bindings WHERE conversation = ?", (conversation,)
        )
        return Binding(**dict(row)) if row else None

    async def bind(
        self, conversation: str, session: str, *, agent_override: str | None = None
    ) -> None:
        """Point the conversation at `session` (keeping its agent override unless given)."""

        def _bind(conn: Conn) -> None:
            now = time.time()
            conn.execute(
                "INSERT INTO channel_bindings(conversation, session, agent_override, last_active)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(conversation) DO UPDATE SET"
                " session = excluded.session, last_active = excluded.last_active"
                + (
                    ", agent_override = excluded.agent_override"
                    if agent_override is not None
                    else ""
                ),
                (conversation, session, agent_override or "", now),
            )

        await self.db.write(_bind)

    async def touch(self, conversation: str) -> None:
        await self.db.run(
            lambda conn: conn.execute(
                "UPDATE channel_bindings SET last_active = ? WHERE conversation = ?",
                (time.time(), conversation),
            )
        )

    async def conversation_of(self, session: str) -> str | None:
        """The conversation a session is bound to (newest binding), if any."""
        row = await self.db.fetchone(
            "SELECT conversation FROM channel_bindings WHERE session = ?"
            " ORDER BY last_active DESC LIMIT 1",
            (session,),
        )
        return str(row["conversation"]) if row else None

    # -- delivery progress --------------------------------------------------------------------

    async def sent_chunks(self, delivery: str) -> dict[int, str]:
        rows = await self.db.fetchall(_SENT, (delivery,))
        return {int(r["idx"]): str(r["message_id"]) for r in rows}

    async def attempted_chunks(self, delivery: str) -> dict[int, float]:
        """When a send of each chunk of `delivery` first started (delivery_attempts): a
        chunk started and not in `sent_chunks` may have reached the chat."""
        rows = await self.db.fetchall(_ATTEMPTED, (delivery,))
        return {int(r["idx"]): float(r["first"]) for r in rows}

    async def begin_send(self, lease: Lease, chunks: range) -> SendProgress:
        """In one trip, as a delivery starts sending `chunks`: which were sent, when the
        unrecorded sends of the others first started, and the start of the first unsent
        one's send noted now (start_chunk). A lost lease raises before anything is sent."""
        schema = self._jobs_schema()
        job = lease.job.id

        def _begin(conn: Conn) -> SendProgress:
            lease.check(conn, schema)
            sent = {int(r["idx"]): str(r["message_id"]) for r in conn.execute(_SENT, (job,))}
            attempted = {int(r["idx"]): float(r["first"]) for r in conn.execute(_ATTEMPTED, (job,))}
            first = next((index for index in chunks if index not in sent), None)
            if first is not None:
                _attempt(conn, lease, first)
            return SendProgress(sent, attempted, first)

        # Bounded by primary keys, beside other writers (as record_chunk): one trip where
        # a delivery without attempts took one read.
        return await self.db.write(_begin, shared=True)

    async def start_chunk(self, lease: Lease, index: int) -> None:
        """Note that a send of chunk `index` starts now (a check that the job is still
        ours in the same transaction: a lost lease sends nothing)."""
        schema = self._jobs_schema()

        def _start(conn: Conn) -> None:
            lease.check(conn, schema)
            _attempt(conn, lease, index)

        # Bounded by primary keys and written to run beside other writers (the lease
        # check's row lock): no wait for the store's writer lock (PostgreSQL's) before a send.
        await self.db.write(_start, shared=True)

    async def record_chunk(
        self, lease: Lease, index: int, message_id: str, *, then: int | None = None
    ) -> None:
        """Record a sent chunk, in the same transaction as a check that the job is still ours;
        `then`: the chunk whose send starts next, noted in the same trip (start_chunk)."""
        schema = self._jobs_schema()

        def _record(conn: Conn) -> None:
            lease.check(conn, schema)
            conn.execute(
                "INSERT INTO delivery_chunks(delivery, idx, message_id, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(delivery, idx) DO UPDATE SET message_id = excluded.message_id,"
                " at = excluded.at",
                (lease.job.id, index, message_id, time.time()),
            )
            if then is not None:
                _attempt(conn, lease, then)

        # Between the platform's answer and this record a crash sends the chunk again
        # where the platform has no key to drop it by, so nothing waits here that need
        # not: bounded by primary keys, it runs beside other writers (the lease check's
        # row lock fences it), without PostgreSQL's store writer lock, which any long
        # write of control.db on any node holds; SQLite commits it with the writes
        # waiting beside it.
        await self.db.write(_record, shared=True)

    def _jobs_schema(self) -> str:
        """The jobs table is this database's own: SQLite's `main`, PostgreSQL's schema."""
        return "main" if self.db.dialect == "sqlite" else self.db.name

    # -- prompts waiting for an answer (shared by every process) ---------------------------

    async def open_prompt(self, prompt: Prompt) -> None:
        """Record a prompt (replacing one of the same id, or holding the same nonce)."""
        values = (
            prompt.id,
            prompt.kind,
            prompt.conversation,
            prompt.turn,
            prompt.nonce,
            dumps(prompt.choices),
            prompt.created,
            prompt.tool,
            prompt.summary,
            prompt.reason,
            prompt.agent,
            prompt.session,
        )

        def _open(conn: Conn) -> None:
            # What INSERT OR REPLACE did, said on both engines: a row holding the nonce
            # goes, and a row of the same id is overwritten whole (its answer cleared).
            conn.execute(
                "DELETE FROM channel_prompts WHERE nonce = ? AND id <> ?", (prompt.nonce, prompt.id)
            )
            conn.execute(
                "INSERT INTO channel_prompts(id, kind, conversation, turn, nonce,"
                " choices, answer, by, created, tool, summary, reason, agent, session)"
                " VALUES (?, ?, ?, ?, ?, ?, NULL, '', ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET kind = excluded.kind,"
                " conversation = excluded.conversation, turn = excluded.turn,"
                " nonce = excluded.nonce, choices = excluded.choices, answer = NULL, by = '',"
                " created = excluded.created, tool = excluded.tool, summary = excluded.summary,"
                " reason = excluded.reason, agent = excluded.agent, session = excluded.session",
                values,
            )

        await self.db.write(_open)

    async def waiting_approvals(self) -> list[Prompt]:
        """Every approval prompt of every conversation still waiting, oldest first.

        Waiting: unanswered, younger than PROMPT_SECONDS and its turn job still running
        (a prompt of a crashed process's turn is not listed, though its row may remain).
        """
        rows = await self.db.fetchall(
            f"SELECT p.* FROM channel_prompts p WHERE {_WAITING_APPROVAL} ORDER BY p.created, p.id",
            (time.time() - PROMPT_SECONDS,),
        )
        return [_prompt(row) for row in rows]

    async def answer_waiting_approval(self, prompt_id: str, answer: str, by: str) -> bool:
        """Record the first answer to an approval still waiting (as `waiting_approvals`
        lists it); False when it was answered, expired, or its turn stopped."""

        def _answer(conn: Conn) -> bool:
            cursor = conn.execute(
                f"UPDATE channel_prompts AS p SET answer = ?, by = ? WHERE p.id = ?"
                f" AND {_WAITING_APPROVAL}",
                (answer, by, prompt_id, time.time() - PROMPT_SECONDS),
            )
            return cursor.rowcount == 1

        return await self.db.write(_answer)

    async def waiting_prompt(self, conversation: str) -> Prompt | None:
        """The conversation's oldest unanswered prompt whose turn is still running."""
        row = await self.db.fetchone(
            "SELECT p.* FROM channel_prompts p WHERE p.conversation = ? AND p.answer IS NULL"
            " AND p.created >= ? AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = p.turn"
            " AND j.status = 'running') ORDER BY p.created LIMIT 1",
            (conversation, time.time() - PROMPT_SECONDS),
        )
        return _prompt(row) if row else None

    async def prompt_by_nonce(self, nonce: str) -> Prompt | None:
        """An unanswered prompt by its button nonce (None: answered, expired or gone)."""
        row = await self.db.fetchone(
            "SELECT * FROM channel_prompts WHERE nonce = ? AND answer IS NULL AND created >= ?",
            (nonce, time.time() - PROMPT_SECONDS),
        )
        return _prompt(row) if row else None

    async def answer_prompt(self, prompt_id: str, answer: str, by: str) -> bool:
        """Record the first answer; False when the prompt was answered or closed already."""

        def _answer(conn: Conn) -> bool:
            cursor = conn.execute(
                "UPDATE channel_prompts SET answer = ?, by = ? WHERE id = ? AND answer IS NULL",
                (answer, by, prompt_id),
            )
            return cursor.rowcount == 1

        return await self.db.write(_answer)

    async def prompt_answer(self, prompt_id: str) -> tuple[str, str] | None:
        row = await self.db.fetchone(
            "SELECT answer, by FROM channel_prompts WHERE id = ? AND answer IS NOT NULL",
            (prompt_id,),
        )
        return (str(row["answer"]), str(row["by"])) if row else None

    async def close_prompt(self, prompt_id: str) -> None:
        await self.db.write(
            lambda conn: conn.execute("DELETE FROM channel_prompts WHERE id = ?", (prompt_id,))
        )

    # -- progress drafts ------------------------------------------------------------------------

    async def draft(self, turn: str) -> tuple[str, str] | None:
        row = await self.db.fetchone(
            "SELECT address, message_id FROM channel_drafts WHERE turn = ?", (turn,)
        )
        return (str(row["address"]), str(row["message_id"])) if row else None

    async def save_draft(self, turn: str, address: str, message_id: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "INSERT INTO channel_drafts(turn, address, message_id, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(turn) DO UPDATE SET address = excluded.address,"
                " message_id = excluded.message_id, at = excluded.at",
                (turn, address, message_id, time.time()),
            )
        )

    async def drop_draft(self, turn: str) -> None:
        await self.db.write(
            lambda conn: conn.execute("DELETE FROM channel_drafts WHERE turn = ?", (turn,))
        )


# A delivery's recorded chunks, and the first start of each chunk's sends.
_SENT = "SELECT idx, message_id FROM delivery_chunks WHERE delivery = ?"
_ATTEMPTED = "SELECT idx, MIN(at) AS first FROM delivery_attempts WHERE delivery = ? GROUP BY idx"


def _attempt(conn: Conn, lease: Lease, index: int) -> None:
    """Insert the attempt of chunk `index` by this lease's owner (its first time kept)."""
    conn.execute(
        "INSERT INTO delivery_attempts(delivery, idx, owner, at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(delivery, idx, owner) DO NOTHING",
        (lease.job.id, index, lease.owner, time.time()),
    )


def dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
