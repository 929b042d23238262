"""web.db: the web channel's conversations and their message log, and /v1 bookkeeping.

- `conversations`: conversation id -> agent and current session (a conversation
  keeps its agent until a message names another; /new binds a fresh session).
- `events`: every message shown in a conversation (the user's, replies, notices),
  numbered by one growing sequence, so catching up after a disconnect is one
  exact query (`seq > N`). `dedupe` makes appends idempotent: a resent client id
  or a reply delivered twice adds nothing.
- `events.file_*`: a file the agent sent (send_file to a web conversation): its id,
  name, size, media type and where its bytes are (a blob), served under
  /api/chat/{conversation}/files/{id}.
- `pending_turns`: unused since the web chat's replies are delivery jobs of
  its channel account; kept (and emptied by retention) for homes that have it.
- `api_users`, `api_keys`, `responses`: the OpenAI-compatible API's `user`
  sessions, idempotency keys and response ids.

Appends in this process wake the streams waiting on their conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.channels.web import ChatFile as ChatFile
from habakkuk.channels.web import approval_dedupe as approval_dedupe
from habakkuk.engine.sql import Conn, Row, Schema
from habakkuk.engine.store import Database, Migration, SqliteDatabase

MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE conversations (
            conversation TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            session TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_at REAL NOT NULL
        );
        CREATE INDEX conversations_recent ON conversations(last_at);
        CREATE INDEX conversations_session ON conversations(session);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            turn TEXT NOT NULL DEFAULT '',
            session TEXT NOT NULL DEFAULT '',
            agent TEXT NOT NULL DEFAULT '',
            dedupe TEXT UNIQUE,
            at REAL NOT NULL
        );
        CREATE INDEX events_conversation ON events(conversation, seq);
        CREATE TABLE pending_turns (
            turn TEXT PRIMARY KEY,
            conversation TEXT NOT NULL,
            session TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX pending_turns_session ON pending_turns(session);
        CREATE TABLE api_users (
            user TEXT NOT NULL,
            agent TEXT NOT NULL,
            session TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (user, agent)
        );
        CREATE TABLE api_keys (
            key TEXT PRIMARY KEY,
            session TEXT NOT NULL,
            turn TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            session TEXT NOT NULL,
            agent TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        """,
    ),
    Migration(
        2,
        """
        ALTER TABLE events ADD COLUMN file_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE events ADD COLUMN file_name TEXT NOT NULL DEFAULT '';
        ALTER TABLE events ADD COLUMN file_size INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE events ADD COLUMN file_type TEXT NOT NULL DEFAULT '';
        ALTER TABLE events ADD COLUMN file_path TEXT NOT NULL DEFAULT '';
        CREATE INDEX events_file ON events(file_id) WHERE file_id != '';
        """,
    ),
]

# PostgreSQL's own steps (engine/pg.py): numbered from 1, starting at the tables SQLite
# had reached when the port was made.
PG_MIGRATIONS: list[Migration] = []

SCHEMA = Schema("web", MIGRATIONS, PG_MIGRATIONS)

# Idempotency keys only need to outlive a client's retries.
API_KEY_RETENTION_SECONDS = 7 * 86400
# web.db is the chat's display log (transcripts.db keeps the record), so it is
# bounded: messages and /v1 bookkeeping older than this are dropped on open.
EVENT_RETENTION_SECONDS = 180 * 86400


@dataclass
class Conversation:
    conversation: str
    agent: str
    session: str
    created_at: float
    last_at: float


@dataclass
class ChatEvent:
    """One message of a conversation's log."""

    seq: int
    conversation: str
    role: str  # user, assistant, notice, error, file
    text: str
    turn: str
    session: str
    agent: str
    at: float
    approval: str = ""  # the approval an "Approval needed" notice asks about
    file: ChatFile | None = None  # a file entry's file (role "file")

    def to_json(self) -> dict[str, Any]:
        from habakkuk.engine.export import rfc3339

        return {
            "seq": self.seq,
            "conversation": self.conversation,
            "role": self.role,
            "text": self.text,
            "turn": self.turn or None,
            "session": self.session,
            "agent": self.agent,
            "at": rfc3339(self.at),
            "approval": self.approval or None,
            "file": self._file_json(),
        }

    def _file_json(self) -> dict[str, Any] | None:
        if self.file is None:
            return None
        return {
            "id": self.file.id,
            "name": self.file.name,
            "size": self.file.size,
            "media_type": self.file.media_type,
            "url": self.file.url(self.conversation),
        }


def _approval_of(dedupe: str | None) -> str:
    if not dedupe or not dedupe.startswith("approval:"):
        return ""
    return dedupe.split(":", 2)[1]


def _file(row: Row) -> ChatFile | None:
    if not row["file_id"]:
        return None
    return ChatFile(
        row["file_id"], row["file_name"], row["file_size"], row["file_type"], row["file_path"]
    )


def _event(row: Row) -> ChatEvent:
    return ChatEvent(
        row["seq"],
        row["conversation"],
        row["role"],
        row["text"],
        row["turn"],
        row["session"],
        row["agent"],
        row["at"],
        _approval_of(row["dedupe"]),
        _file(row),
    )


def _conversation(row: Row) -> Conversation:
    return Conversation(
        row["conversation"], row["agent"], row["session"], row["created_at"], row["last_at"]
    )


class WebStore:
    """web.db plus the in-process wake-ups of streams following a conversation."""

    def __init__(self, db: Database):
        self.db = db
        self._watchers: dict[str, set[asyncio.Event]] = {}

    @classmethod
    async def open(cls, path: Path) -> WebStore:
        store = cls(await SqliteDatabase.open(path, MIGRATIONS))
        await store.prune(time.time())
        return store

    async def prune(self, now: float) -> None:
        """Drop what is past retention (see the module constants)."""
        keys = now - API_KEY_RETENTION_SECONDS
        old = now - EVENT_RETENTION_SECONDS

        def _prune(conn: Conn) -> None:
            conn.execute("DELETE FROM api_keys WHERE created_at < ?", (keys,))
            conn.execute("DELETE FROM events WHERE at < ?", (old,))
            conn.execute("DELETE FROM pending_turns WHERE created_at < ?", (old,))
            conn.execute("DELETE FROM responses WHERE created_at < ?", (old,))
            conn.execute("DELETE FROM api_users WHERE updated_at < ?", (old,))
            conn.execute("DELETE FROM conversations WHERE last_at < ?", (old,))

        await self.db.write(_prune)

    async def close(self) -> None:
        await self.db.close()

    # -- wake-ups ----------------------------------------------------------------

    @contextlib.contextmanager
    def watch(self, conversation: str) -> Iterator[asyncio.Event]:
        """An Event set whenever the conversation changes (new message or typing)."""
        event = asyncio.Event()
        self._watchers.setdefault(conversation, set()).add(event)
        try:
            yield event
        finally:
            watchers = self._watchers.get(conversation)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    self._watchers.pop(conversation, None)

    def wake(self, conversation: str) -> None:
        for event in self._watchers.get(conversation, ()):
            event.set()

    # -- conversations -------------------------------------------------------------

    async def conversation(self, conversation: str) -> Conversation | None:
        row = await self.db.fetchone(
            "SELECT * FROM conversations WHERE conversation = ?", (conversation,)
        )
        return _conversation(row) if row else None

    async def bind(self, conversation: str, agent: str, session: str) -> Conversation:
        """Point the conversation at `session` of `agent`."""
        now = time.time()

        def _bind(conn: Conn) -> Conversation:
            conn.execute(
                "INSERT INTO conversations(conversation, agent, session, created_at, last_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(conversation) DO UPDATE SET"
                " agent = excluded.agent, session = excluded.session, last_at = excluded.last_at",
                (conversation, agent, session, now, now),
            )
            row = conn.execute(
                "SELECT * FROM conversations WHERE conversation = ?", (conversation,)
            ).fetchone()
            return _conversation(row)

        return await self.db.write(_bind)

    async def conversations(self, limit: int = 50) -> list[Conversation]:
        rows = await self.db.fetchall(
            "SELECT * FROM conversations ORDER BY last_at DESC, rowid DESC LIMIT ?", (limit,)
        )
        return [_conversation(r) for r in rows]

    async def conversations_of(self, session: str) -> list[str]:
        """Conversations whose current session is `session`."""
        rows = await self.db.fetchall(
            "SELECT conversation FROM conversations WHERE session = ?", (session,)
        )
        return [r[0] for r in rows]

    # -- events --------------------------------------------------------------------

    async def append(
        self,
        conversation: str,
        role: str,
        text: str,
        *,
        turn: str = "",
        session: str = "",
        agent: str = "",
        dedupe: str | None = None,
        file: ChatFile | None = None,
    ) -> tuple[ChatEvent, bool]:
        """Append a message (with `file`: a file entry) unless `dedupe` was used; returns
        (event, created)."""
        now = time.time()
        f = file or ChatFile("", "", 0, "", "")

        def _append(conn: Conn) -> tuple[ChatEvent, bool]:
            if dedupe is not None:
                row = conn.execute("SELECT * FROM events WHERE dedupe = ?", (dedupe,)).fetchone()
                if row is not None:
                    return _event(row), False
            cursor = conn.execute(
                "INSERT INTO events(conversation, role, text, turn, session, agent, dedupe, at,"
                " file_id, file_name, file_size, file_type, file_path)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                (conversation, role, text, turn, session, agent, dedupe, now, *f.columns()),
            )
            conn.execute(
                "UPDATE conversations SET last_at = ? WHERE conversation = ?", (now, conversation)
            )
            seq = cursor.fetchone()[0]
            row = conn.execute("SELECT * FROM events WHERE seq = ?", (seq,)).fetchone()
            return _event(row), True

        event, created = await self.db.write(_append)
        if created:
            self.wake(conversation)
        return event, created

    async def file(self, conversation: str, file_id: str) -> ChatFile | None:
        """A file of `conversation` by its id (None for an unknown id or another
        conversation's file)."""
        if not file_id:
            return None
        row = await self.db.fetchone(
            "SELECT * FROM events WHERE file_id = ? AND conversation = ?", (file_id, conversation)
        )
        return _file(row) if row else None

    async def find(self, dedupe: str) -> ChatEvent | None:
        row = await self.db.fetchone("SELECT * FROM events WHERE dedupe = ?", (dedupe,))
        return _event(row) if row else None

    async def events(self, conversation: str, after: int = 0, limit: int = 500) -> list[ChatEvent]:
        """Messages with seq > after, oldest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM events WHERE conversation = ? AND seq > ? ORDER BY seq LIMIT ?",
            (conversation, after, limit),
        )
        return [_event(r) for r in rows]

    async def last_event(self, conversation: str) -> ChatEvent | None:
        row = await self.db.fetchone(
            "SELECT * FROM events WHERE conversation = ? ORDER BY seq DESC LIMIT 1",
            (conversation,),
        )
        return _event(row) if row else None

    async def first_user_text(self, conversation: str) -> str:
        row = await self.db.fetchone(
            "SELECT text FROM events WHERE conversation = ? AND role = 'user' ORDER BY seq LIMIT 1",
            (conversation,),
        )
        return str(row[0]) if row else ""

    # -- OpenAI-compatible API -------------------------------------------------------------

    async def user_session(self, user: str, agent: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT session FROM api_users WHERE user = ? AND agent = ?", (user, agent)
        )
        return str(row[0]) if row else None

    async def remember_user(self, user: str, agent: str, session: str) -> None:
        await self.db.write(
            lambda c: c.execute(
                "INSERT INTO api_users(user, agent, session, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(user, agent) DO UPDATE SET session = excluded.session,"
                " updated_at = excluded.updated_at",
                (user, agent, session, time.time()),
            )
        )

    async def api_key(self, key: str) -> tuple[str, str] | None:
        """(session, turn) of an idempotency key seen before."""
        row = await self.db.fetchone("SELECT session, turn FROM api_keys WHERE key = ?", (key,))
        return (row[0], row[1]) if row else None

    async def remember_api_key(self, key: str, session: str, turn: str) -> tuple[str, str]:
        """Record the key unless another request did first; returns the winner's pair."""

        def _remember(conn: Conn) -> tuple[str, str]:
            conn.execute(
                "INSERT INTO api_keys(key, session, turn, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(key) DO NOTHING",
                (key, session, turn, time.time()),
            )
            row = conn.execute(
                "SELECT session, turn FROM api_keys WHERE key = ?", (key,)
            ).fetchone()
            return row[0], row[1]

        return await self.db.write(_remember)

    async def response(self, response_id: str) -> tuple[str, str] | None:
        """(session, agent) of a response this server gave."""
        row = await self.db.fetchone(
            "SELECT session, agent FROM responses WHERE id = ?", (response_id,)
        )
        return (row[0], row[1]) if row else None

    async def remember_response(self, response_id: str, session: str, agent: str) -> None:
        await self.db.write(
            lambda c: c.execute(
                "INSERT INTO responses(id, session, agent, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(id) DO NOTHING",
                (response_id, session, agent, time.time()),
            )
        )
