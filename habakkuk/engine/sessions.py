"""Sessions and transcripts (transcripts.db): append-only, searchable, repaired on load.

A session holds its frozen system prompt. Messages are appended, never
rewritten; each append made by a job first checks the job's lease in the same
transaction (control.db is attached as `control`). Triggers keep `message_text`
(the words of user and assistant messages, cut to 8,000 characters) and its FTS5
index in step with `messages`. On PostgreSQL (the `transcripts` schema, control's
tables as `control.x` as on SQLite) a PL/pgSQL trigger writes the same rows and the
index is message_text's generated tsvector (PG_MIGRATIONS, session_search_pg.py).

What Habakkuk sends along with the user's words (the time, the todo list) is a
context block, never indexed or shown. Versions before transcripts schema 5
stored those notes as text blocks after the words: `legacy_context` turns them
into context blocks on read, the index leaves them out, and migration 5
reindexed the rows written before it.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from habakkuk.engine.sql import Conn, Row, Schema
from habakkuk.engine.store import SqliteDatabase

from .errors import HabakkukError, NotFound
from .llm.types import (
    Block,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_from_json,
)
from .redact import redact, redact_blocks
from .session_search import SEARCH_WINDOW as SEARCH_WINDOW
from .session_search import SearchHit as SearchHit
from .session_search import search_messages
from .session_search_pg import search_messages_pg
from .store import Database, Migration, transaction

if TYPE_CHECKING:
    from .storage import Storage

WriteGuard = Callable[[Conn], None]
T = TypeVar("T")

INTERRUPTED = (
    "interrupted: the process stopped before this tool call finished; "
    "check the state before repeating it"
)

# Where a session came from (its `origin`), for the ones the home's own work starts: a
# board card's run and a delegated sub-agent's task. Nobody talks in them, so the sessions
# list leaves them out unless asked (Sessions.list_sessions, `include_work`).
BOARD_ORIGIN = "board"
DELEGATE_ORIGIN = "delegate"
# A /btw question's throwaway session (services/aside.py): skipped by the lists too.
ASIDE_ORIGIN = "btw"
WORK_ORIGINS = (BOARD_ORIGIN, DELEGATE_ORIGIN, ASIDE_ORIGIN)

# Notes older versions stored as text blocks after a user's words (index 1 on).
LEGACY_TIME_PREFIX = "[current time: "
LEGACY_TODO_PREFIX = "[your todo list for this session]\n"
# The first line of the note a /v1 request's system messages became before schema 5.
LEGACY_CLIENT_HEADER = "Notes from the client application (its system and developer messages):"


# The todo note's first line, without its newline (PostgreSQL's trigger spells it apart).
_TODO_HEADER = LEGACY_TODO_PREFIX.removesuffix("\n")


def _words_sql(blocks: str, role: str) -> str:
    """SQL for the searchable words of a stored message: its text blocks, newline-joined,
    less the notes older versions stored as text after a user's words."""
    text = "json_extract(value, '$.text')"
    return (
        f"(SELECT group_concat({text}, char(10)) FROM json_each({blocks})"
        f" WHERE json_extract(value, '$.type') = 'text'"
        f" AND NOT ({role} = 'user' AND key > 0"
        f" AND ({text} GLOB '[[]current time: *]'"
        f" OR {text} GLOB '[[]your todo list for this session]' || char(10) || '*')))"
    )


MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            system_prompt TEXT NOT NULL DEFAULT '',
            origin TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX sessions_recent ON sessions(agent, updated_at);
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            blocks TEXT NOT NULL,
            turn_id TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            UNIQUE(session_id, seq)
        );
        CREATE INDEX messages_turn ON messages(session_id, turn_id);
        """,
    ),
    Migration(
        2,
        """
        CREATE TABLE message_text (
            message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX message_text_session ON message_text(session_id);
        CREATE VIRTUAL TABLE message_fts USING fts5(
            text, content='message_text', content_rowid='message_id'
        );
        CREATE TRIGGER messages_text_ai AFTER INSERT ON messages
        WHEN NEW.role IN ('user', 'assistant') BEGIN
            INSERT INTO message_text(message_id, session_id, seq, role, text)
            SELECT NEW.id, NEW.session_id, NEW.seq, NEW.role, substr(t, 1, 8000)
            FROM (SELECT group_concat(json_extract(value, '$.text'), char(10)) AS t
                  FROM json_each(NEW.blocks) WHERE json_extract(value, '$.type') = 'text')
            WHERE t IS NOT NULL AND t != '';
        END;
        CREATE TRIGGER message_text_ai AFTER INSERT ON message_text BEGIN
            INSERT INTO message_fts(rowid, text) VALUES (NEW.message_id, NEW.text);
        END;
        CREATE TRIGGER message_text_ad AFTER DELETE ON message_text BEGIN
            INSERT INTO message_fts(message_fts, rowid, text)
            VALUES ('delete', OLD.message_id, OLD.text);
        END;
        """,
    ),
    Migration(
        3,
        """
        ALTER TABLE sessions ADD COLUMN title_source TEXT NOT NULL DEFAULT '';
        ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';
        """,
    ),
    Migration(
        4,
        """
        CREATE TABLE compactions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            summary TEXT NOT NULL,
            first_kept_seq INTEGER NOT NULL,
            transcript_len INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX compactions_session ON compactions(session_id, id);
        """,
    ),
    # The index holds only the user's words: the time and todo notes older versions
    # stored as text are left out, for new rows (the trigger) and old ones (a reindex).
    # Sessions a /v1 request titled by its client's notes get their user's words.
    Migration(
        5,
        f"""
        DROP TRIGGER messages_text_ai;
        CREATE TRIGGER messages_text_ai AFTER INSERT ON messages
        WHEN NEW.role IN ('user', 'assistant') AND json_valid(NEW.blocks) BEGIN
            INSERT INTO message_text(message_id, session_id, seq, role, text)
            SELECT NEW.id, NEW.session_id, NEW.seq, NEW.role, substr(t, 1, 8000)
            FROM (SELECT {_words_sql("NEW.blocks", "NEW.role")} AS t)
            WHERE t IS NOT NULL AND t != '';
        END;
        DROP TRIGGER message_text_ai;
        DROP TRIGGER message_text_ad;
        DELETE FROM message_text;
        INSERT INTO message_text(message_id, session_id, seq, role, text)
        SELECT id, session_id, seq, role, substr(t, 1, 8000)
        FROM (SELECT m.id, m.session_id, m.seq, m.role, {_words_sql("m.blocks", "m.role")} AS t
              FROM messages m WHERE m.role IN ('user', 'assistant') AND json_valid(m.blocks))
        WHERE t IS NOT NULL AND t != '';
        INSERT INTO message_fts(message_fts) VALUES ('rebuild');
        CREATE TRIGGER message_text_ai AFTER INSERT ON message_text BEGIN
            INSERT INTO message_fts(rowid, text) VALUES (NEW.message_id, NEW.text);
        END;
        CREATE TRIGGER message_text_ad AFTER DELETE ON message_text BEGIN
            INSERT INTO message_fts(message_fts, rowid, text)
            VALUES ('delete', OLD.message_id, OLD.text);
        END;
        UPDATE sessions SET title = coalesce((
            SELECT substr(CASE WHEN instr(t, char(10)) > 0
                               THEN rtrim(substr(t, 1, instr(t, char(10)) - 1)) ELSE t END, 1, 80)
            FROM (SELECT trim(json_extract(m.blocks, '$[0].text')) AS t, m.seq AS seq
                  FROM messages m
                  WHERE m.session_id = sessions.id AND m.role = 'user' AND json_valid(m.blocks)
                    AND json_extract(m.blocks, '$[0].type') = 'text')
            WHERE t != '' AND substr(t, 1, {len(LEGACY_CLIENT_HEADER)}) != '{LEGACY_CLIENT_HEADER}'
            ORDER BY seq LIMIT 1), '')
        WHERE title_source = 'first_message' AND title = '{LEGACY_CLIENT_HEADER}';
        """,
    ),
    # The recent list (no agent named: the sessions screen, /api/sessions) read the
    # whole table and sorted it; this index reads the newest rows in order.
    Migration(6, "CREATE INDEX sessions_listed ON sessions(archived, updated_at);"),
]

# PostgreSQL's own steps (engine/pg.py): numbered from 1, starting at the tables SQLite
# had reached when the port was made (its schema 6). The same tables and columns, so
# `habakkuk storage migrate` copies them by name, with what SQLite does its own way:
# - sessions has SQLite's implicit `rowid` as a column (the recent list's tie-break);
# - message_text carries its words' tsvector (`words`, generated from `text`: split
#   where FTS5's unicode61 splits, case folded, no stemming; session_search_pg.py)
#   under a GIN index, in place of the message_fts table;
# - the trigger filling message_text is PL/pgSQL, the same words as SQLite's: the text
#   blocks of user and assistant messages, newline-joined, less the time and todo notes
#   older versions stored as text after a user's words, cut to 8,000 characters. A
#   message whose blocks are not JSON is left out of the index, as json_valid leaves it.
PG_MIGRATIONS: list[Migration] = [
    Migration(
        1,
        f"""
        CREATE FUNCTION search_words(t TEXT) RETURNS TEXT
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN regexp_replace(t, '[^[:alnum:]]+', ' ', 'g');

        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            system_prompt TEXT NOT NULL DEFAULT '',
            origin TEXT NOT NULL DEFAULT '',
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            title_source TEXT NOT NULL DEFAULT '',
            archived BIGINT NOT NULL DEFAULT 0,
            forked_from TEXT NOT NULL DEFAULT '',
            rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE
        );
        CREATE INDEX sessions_recent ON sessions(agent, updated_at);
        CREATE INDEX sessions_listed ON sessions(archived, updated_at, rowid);
        CREATE TABLE messages (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            role TEXT NOT NULL,
            model TEXT NOT NULL DEFAULT '',
            blocks TEXT NOT NULL,
            turn_id TEXT NOT NULL DEFAULT '',
            created_at DOUBLE PRECISION NOT NULL,
            UNIQUE(session_id, seq)
        );
        CREATE INDEX messages_turn ON messages(session_id, turn_id);
        CREATE TABLE message_text (
            message_id BIGINT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            words tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_words(text))) STORED
        );
        CREATE INDEX message_text_session ON message_text(session_id);
        CREATE INDEX message_text_words ON message_text USING gin(words);
        CREATE TABLE compactions (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            summary TEXT NOT NULL,
            first_kept_seq BIGINT NOT NULL,
            transcript_len BIGINT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX compactions_session ON compactions(session_id, id);

        CREATE FUNCTION message_words(blocks TEXT, role TEXT) RETURNS TEXT
        LANGUAGE plpgsql IMMUTABLE AS $$
        DECLARE
            doc jsonb;
            found TEXT;
        BEGIN
            IF role NOT IN ('user', 'assistant') THEN
                RETURN NULL;
            END IF;
            BEGIN
                doc := blocks::jsonb;
            EXCEPTION WHEN others THEN
                RETURN NULL;  -- not JSON: not indexed (SQLite's json_valid)
            END;
            IF jsonb_typeof(doc) <> 'array' THEN
                RETURN NULL;
            END IF;
            SELECT string_agg(b.value ->> 'text', chr(10) ORDER BY b.at) INTO found
            FROM jsonb_array_elements(doc) WITH ORDINALITY AS b(value, at)
            WHERE b.value ->> 'type' = 'text' AND b.value ->> 'text' IS NOT NULL
              AND NOT (role = 'user' AND b.at > 1
                       AND ((b.value ->> 'text') LIKE '{LEGACY_TIME_PREFIX}%]'
                            OR (b.value ->> 'text') LIKE '{_TODO_HEADER}' || chr(10) || '%'));
            RETURN substr(found, 1, 8000);
        END $$;

        CREATE FUNCTION messages_text_ai() RETURNS trigger
        LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
            found TEXT := message_words(NEW.blocks, NEW.role);
        BEGIN
            IF found IS NOT NULL AND found <> '' THEN
                INSERT INTO message_text(message_id, session_id, seq, role, text)
                VALUES (NEW.id, NEW.session_id, NEW.seq, NEW.role, found);
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER messages_text_ai AFTER INSERT ON messages
        FOR EACH ROW EXECUTE FUNCTION messages_text_ai();
        """,
    ),
    # Diacritics as FTS5's remove_diacritics: "cafe" finds "café" and "Zürich" is
    # "zurich". The words are decomposed (NFD) and their combining marks dropped, so
    # no extension (unaccent) is needed. normalize() needs a UTF8 server; on another
    # encoding the words stay as they were. The stored tsvectors are generated again.
    Migration(
        2,
        r"""
        DO $$
        BEGIN
            IF current_setting('server_encoding') = 'UTF8' THEN
                CREATE OR REPLACE FUNCTION search_words(t TEXT) RETURNS TEXT
                LANGUAGE sql IMMUTABLE PARALLEL SAFE
                RETURN regexp_replace(
                    regexp_replace(normalize(t, NFD), '[\u0300-\u036f]+', '', 'g'),
                    '[^[:alnum:]]+', ' ', 'g');
                UPDATE message_text SET text = text;
            END IF;
        END $$;
        """,
    ),
]

SCHEMA = Schema("transcripts", MIGRATIONS, PG_MIGRATIONS)

# How the model is told that a summary stands in for the older messages.
SUMMARY_PREFIX = (
    "Summary of the earlier conversation (older messages were folded into this summary "
    "to save context; the messages after it are verbatim):\n\n"
)


@dataclass
class Session:
    id: str
    agent: str
    title: str
    system_prompt: str
    origin: str
    created_at: float
    updated_at: float
    title_source: str = ""
    archived: bool = False
    forked_from: str = ""

    @classmethod
    def from_row(cls, row: Row) -> Session:
        return cls(
            id=row["id"],
            agent=row["agent"],
            title=row["title"],
            system_prompt=row["system_prompt"],
            origin=row["origin"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            title_source=row["title_source"],
            archived=bool(row["archived"]),
            forked_from=row["forked_from"],
        )


@dataclass
class StoredMessage:
    """A message as stored, with its position and the turn that wrote it."""

    seq: int
    message: Message
    turn_id: str
    created_at: float
    raw_blocks: list[dict[str, Any]]

    @property
    def role(self) -> str:
        return self.message.role


@dataclass
class Compaction:
    """A compaction record: `summary` stands in for every message before `first_kept_seq`.

    `transcript_len` is how many messages the transcript had when it was written.
    """

    session_id: str
    summary: str
    first_kept_seq: int
    transcript_len: int
    created_at: float

    @classmethod
    def from_row(cls, row: Row) -> Compaction:
        return cls(
            session_id=row["session_id"],
            summary=row["summary"],
            first_kept_seq=row["first_kept_seq"],
            transcript_len=row["transcript_len"],
            created_at=row["created_at"],
        )


def summary_message(summary: str) -> Message:
    """The user message that carries a compaction summary at the head of the model's view."""
    return Message("user", [TextBlock(SUMMARY_PREFIX + summary)])


@dataclass
class TranscriptView:
    """What the model is sent: the latest summary, then the messages kept verbatim.

    `kept` are the stored messages from the compaction's first kept seq on (all of
    them without a compaction); `last_seq` is the transcript's last seq when read
    (-1 when empty), what a compaction written from this view expects.
    """

    compaction: Compaction | None
    kept: list[StoredMessage]
    last_seq: int

    @property
    def messages(self) -> list[Message]:
        """The view as messages, not yet repaired."""
        head = [summary_message(self.compaction.summary)] if self.compaction else []
        return head + [m.message for m in self.kept]

    def repaired(self) -> Repair:
        return repair(self.messages)


@dataclass
class Repair:
    """What `repair` changed in memory."""

    messages: list[Message]
    interrupted: list[ToolUseBlock]  # calls without results in the last message
    dropped_results: int


def repair(messages: list[Message]) -> Repair:
    """Make a transcript valid for any model API.

    Every tool call gets a result in the message that follows its assistant
    message (an "interrupted" error result when none was recorded), and a result
    nobody asked for is dropped. `interrupted` lists the calls of the final
    assistant message that had no results, so the caller can record them.
    """
    fixed: list[Message] = []
    dropped = 0
    interrupted: list[ToolUseBlock] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role == "assistant":
            fixed.append(message)
            calls = message.tool_uses
            following = messages[index + 1] if index + 1 < len(messages) else None
            if calls:
                wanted = {c.tool_use_id for c in calls}
                if following is not None and following.role == "user" and following.tool_results:
                    kept = [
                        b
                        for b in following.blocks
                        if not isinstance(b, ToolResultBlock) or b.tool_use_id in wanted
                    ]
                    dropped += len(following.blocks) - len(kept)
                    have = {b.tool_use_id for b in kept if isinstance(b, ToolResultBlock)}
                    missing = [
                        ToolResultBlock(c.tool_use_id, INTERRUPTED, True)
                        for c in calls
                        if c.tool_use_id not in have
                    ]
                    results = [b for b in kept if isinstance(b, ToolResultBlock)] + missing
                    others = [b for b in kept if not isinstance(b, ToolResultBlock)]
                    fixed.append(Message("user", [*results, *others], following.model))
                    index += 2
                    continue
                if following is None:
                    interrupted = list(calls)
                fixed.append(
                    Message(
                        "user", [ToolResultBlock(c.tool_use_id, INTERRUPTED, True) for c in calls]
                    )
                )
            index += 1
            continue
        stray = message.tool_results
        if stray:
            dropped += len(stray)
            rest: list[Block] = [b for b in message.blocks if not isinstance(b, ToolResultBlock)]
            if rest:
                fixed.append(Message("user", rest, message.model))
        else:
            fixed.append(message)
        index += 1
    return Repair(fixed, interrupted, dropped)


class TranscriptStore:
    """Sessions and their messages."""

    def __init__(self, db: Database, *, state_schema: str | None = None):
        self.db = db
        # The name state.db is attached under on this connection (None: not attached),
        # so a turn's opening transaction reads the session's state too.
        self.state_schema = state_schema

    @classmethod
    async def open(
        cls, path: Path, control_path: Path, *, state_path: Path | None = None
    ) -> TranscriptStore:
        """Open transcripts.db with control.db attached as `control` (and state.db as
        `state` when `state_path` is given: it must be migrated already)."""
        attach = {"control": control_path}
        if state_path is not None:
            attach["state"] = state_path
        db = await SqliteDatabase.open(path, MIGRATIONS, attach=attach)
        return cls(db, state_schema="state" if state_path is not None else None)

    @classmethod
    async def open_on(cls, storage: Storage) -> TranscriptStore:
        """Open the transcripts on `storage`, with control and state attached (state
        must be migrated already)."""
        db = await storage.open(SCHEMA, attach=("control", "state"))
        return cls(db, state_schema="state")

    async def close(self) -> None:
        await self.db.close()

    # -- sessions ------------------------------------------------------------------

    async def create_session(
        self, session_id: str, agent: str, system_prompt: str, *, origin: str = ""
    ) -> Session:
        """Create the session unless it exists; returns the stored row either way."""
        now = time.time()

        def _create(conn: Conn) -> Session:
            conn.execute(
                "INSERT INTO sessions(id, agent, system_prompt, origin, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
                (session_id, agent, system_prompt, origin, now, now),
            )
            row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return Session.from_row(row)

        return await self.db.write(_create, keys=_keys(session_id))

    async def get_session(self, session_id: str) -> Session | None:
        row = await self.db.fetchone("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return Session.from_row(row) if row else None

    async def list_sessions(
        self,
        agent: str | None = None,
        *,
        limit: int = 50,
        archived: bool = False,
        without: tuple[str, ...] = (),
    ) -> list[Session]:
        """Most recently updated first; sessions whose origin is in `without` left out."""
        sql = "SELECT * FROM sessions WHERE archived = ?"
        params: list[Any] = [int(archived)]
        if agent:
            sql += " AND agent = ?"
            params.append(agent)
        if without:
            sql += f" AND origin NOT IN ({', '.join('?' * len(without))})"
            params.extend(without)
        sql += " ORDER BY updated_at DESC, rowid DESC LIMIT ?"
        params.append(limit)
        return [Session.from_row(r) for r in await self.db.fetchall(sql, params)]

    async def set_title(self, session_id: str, title: str, source: str = "user") -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE sessions SET title = ?, title_source = ? WHERE id = ?",
                (title, source, session_id),
            ),
            keys=_keys(session_id),
        )

    async def replace_first_message_title(self, session_id: str, title: str) -> Session | None:
        """Set a generated title (title_source "generated") only where the title is still
        the first message's: a title set by hand meanwhile (/title, a rename) wins. The
        session as written, or None when nothing was replaced."""

        def _replace(conn: Conn) -> Row | None:
            row: Row | None = conn.execute(
                "UPDATE sessions SET title = ?, title_source = 'generated'"
                " WHERE id = ? AND title_source = 'first_message' RETURNING *",
                (title, session_id),
            ).fetchone()
            return row

        row = await self.db.write(_replace, keys=_keys(session_id))
        return Session.from_row(row) if row is not None else None

    async def set_archived(self, session_id: str, archived: bool) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE sessions SET archived = ? WHERE id = ?", (int(archived), session_id)
            ),
            keys=_keys(session_id),
        )

    async def delete_sessions(self, session_ids: list[str]) -> list[str]:
        """Delete sessions for good; returns the ids that existed.

        Their messages, search rows and compactions go with them by foreign key (as
        when retention prunes an idle session); state.db's part is the caller's.
        """

        def _delete(conn: Conn) -> list[str]:
            gone = []
            for session_id in session_ids:
                if conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount:
                    gone.append(session_id)
            return gone

        return await self.db.write(_delete)

    async def fork(self, session_id: str, new_id: str, *, upto_seq: int | None = None) -> Session:
        """Copy a session and its messages (all, or those with seq <= `upto_seq`) into
        `new_id`, in one transaction: same agent and frozen system prompt, title
        "Fork of <title>" (set by hand, so never replaced), `forked_from` the source.

        The copy never ends between a tool call and its result: when `upto_seq` falls
        there, it ends at the last earlier message that keeps each call with its
        result. NotFound when the source does not exist; HabakkukError when `new_id` does.
        """
        now = time.time()

        def _fork(conn: Conn) -> Session:
            source = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if source is None:
                raise NotFound.said("errors.sessions.not_found", session=repr(session_id))
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (new_id,)).fetchone():
                raise HabakkukError(f"fork: session {new_id!r} already exists")
            rows = conn.execute(
                "SELECT seq, blocks FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
            last = _fork_point(rows, upto_seq)
            conn.execute(
                "INSERT INTO sessions(id, agent, title, system_prompt, origin, created_at,"
                " updated_at, title_source, archived, forked_from)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'user', 0, ?)",
                (
                    new_id,
                    source["agent"],
                    f"Fork of {source['title'] or session_id}"[:200],
                    source["system_prompt"],
                    source["origin"],
                    now,
                    now,
                    session_id,
                ),
            )
            if last is not None:
                # The triggers index the copied text for search, as for any append.
                conn.execute(
                    "INSERT INTO messages"
                    "(session_id, seq, role, model, blocks, turn_id, created_at)"
                    " SELECT ?, seq, role, model, blocks, turn_id, created_at FROM messages"
                    " WHERE session_id = ? AND seq <= ? ORDER BY seq",
                    (new_id, session_id, last),
                )
                # Seqs are copied unchanged, so a summary whose folded messages all came
                # along still applies; one that folded messages past the copy does not.
                least = "min" if self.db.dialect == "sqlite" else "LEAST"
                conn.execute(
                    "INSERT INTO compactions"
                    "(session_id, summary, first_kept_seq, transcript_len, created_at)"
                    f" SELECT ?, summary, first_kept_seq, {least}(transcript_len, ?), created_at"
                    " FROM compactions WHERE session_id = ? AND first_kept_seq <= ? ORDER BY id",
                    (new_id, last + 1, session_id, last + 1),
                )
            row = conn.execute("SELECT * FROM sessions WHERE id = ?", (new_id,)).fetchone()
            return Session.from_row(row)

        return await self.db.write(_fork)

    # -- messages ------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        message: Message | Callable[[Conn], Message],
        *,
        turn_id: str = "",
        guard: WriteGuard | None = None,
        unless_turn_has: str | None = None,
        then: WriteGuard | None = None,
    ) -> int | None:
        """Append one message; returns its seq. `message` may be a function of the
        connection, called in the transaction after the guard (a tool batch's results with
        the /steer guidance it takes in the same transaction, engine/agent/guidance.py).

        `guard(conn)` runs first inside the same transaction (the job's lease
        check). With `unless_turn_has=ROLE`, nothing is written when the turn
        already has a message of that role (idempotent user-message appends), and
        None is returned. `then(conn)` runs after the append, in the same transaction
        (a turn's reply and its job completed in one trip); if it raises, nothing is
        written.
        """

        def _append(conn: Conn) -> int | None:
            if guard is not None:
                guard(conn)
            written = message(conn) if callable(message) else message
            appended = _append_in(conn, session_id, written, turn_id, unless_turn_has)
            if then is not None:
                then(conn)
            return appended[0] if appended is not None else None

        return await self.db.write(_append, keys=_keys(session_id))

    async def open_turn(
        self,
        session_id: str,
        turn_id: str,
        user_message: Message | Callable[[Conn], Message | None] | None,
        guard: WriteGuard,
    ) -> tuple[Session, TranscriptView] | None:
        """Start (or resume) a turn in one transaction: the lease check, the user's
        message appended once, and the session with the model's view of its
        transcript (the latest summary and the messages after it) read back.

        `user_message` may be a function of the connection, called in the transaction
        after the guard (it reads what the message carries, e.g. the session's state
        through `state_schema`). None when the session does not exist.
        """

        def _open(conn: Conn) -> tuple[Session, TranscriptView] | None:
            guard(conn)
            row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            message = user_message(conn) if callable(user_message) else user_message
            if message is not None:
                appended = _append_in(conn, session_id, message, turn_id, "user")
                row = appended[1] if appended is not None else row
            return Session.from_row(row), _view_in(conn, session_id)

        return await self.db.write(_open, keys=_keys(session_id))

    async def with_session(
        self, session_id: str, fn: Callable[[Conn, Session], T]
    ) -> tuple[Session, T] | None:
        """In one write transaction: the session (None when it does not exist, and `fn`
        is not called) and `fn(conn, session)` (e.g. its turn queued in control.db)."""

        def _with(conn: Conn) -> tuple[Session, T] | None:
            row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            session = Session.from_row(row)
            return session, fn(conn, session)

        return await self.db.write(_with, keys=_keys(session_id))

    async def messages(self, session_id: str, *, after: int = -1) -> list[StoredMessage]:
        """Stored messages in order (seq > after). A corrupt row is skipped, not fatal."""
        rows = await self.db.fetchall(
            "SELECT seq, role, model, blocks, turn_id, created_at FROM messages"
            " WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        )
        return [m for m in (_stored(r) for r in rows) if m is not None]

    async def load_for_model(self, session_id: str) -> Repair:
        """The transcript as the model should see it (the view), repaired."""
        return (await self.view(session_id)).repaired()

    async def view(self, session_id: str) -> TranscriptView:
        """The latest compaction and the messages it keeps, read in one snapshot."""

        def _read(conn: Conn) -> TranscriptView:
            with transaction(conn, immediate=False):
                return _view_in(conn, session_id)

        return await self.db.run(_read)

    async def latest_compaction(self, session_id: str) -> Compaction | None:
        """The newest compaction record of the session, if any."""
        return await self.db.run(lambda conn: _latest_compaction_in(conn, session_id))

    async def add_compaction(
        self,
        session_id: str,
        summary: str,
        first_kept_seq: int,
        expected_last_seq: int,
        guard: WriteGuard | None,
    ) -> bool:
        """Record a compaction, only if the transcript still ends at `expected_last_seq`.

        `guard(conn)` (the job's lease check) runs first in the same transaction and
        raises when the lease is gone, so nothing is written then. False when the
        transcript moved since the summarized view was read (nothing written).
        """

        def _add(conn: Conn) -> bool:
            if guard is not None:
                guard(conn)
            row = conn.execute(
                "SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
            if int(row[0]) != expected_last_seq:
                return False
            conn.execute(
                "INSERT INTO compactions"
                "(session_id, summary, first_kept_seq, transcript_len, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (session_id, redact(summary), first_kept_seq, expected_last_seq + 1, time.time()),
            )
            return True

        return await self.db.write(_add, keys=_keys(session_id))

    async def turn_messages(self, session_id: str, turn_id: str) -> list[StoredMessage]:
        rows = await self.db.fetchall(
            "SELECT seq, role, model, blocks, turn_id, created_at FROM messages"
            " WHERE session_id = ? AND turn_id = ? ORDER BY seq",
            (session_id, turn_id),
        )
        return [m for m in (_stored(r) for r in rows) if m is not None]

    async def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        limit: int = 20,
        window: int = SEARCH_WINDOW,
    ) -> list[SearchHit]:
        """Full-text search over user and assistant text: the best `limit` of the
        messages matching `query` among the newest `window` messages (of `agent`) holding
        every word of it. Messages holding the query's words as one phrase first, then
        the shorter message, then the newest (session_search.py; on PostgreSQL the same
        rules over a tsvector, session_search_pg.py); a "quoted phrase" is
        matched as written. The cost stays flat however long the history: no statistics
        over every match (bm25() counted them all), no phrase checked beyond the window."""
        search = search_messages if self.db.dialect == "sqlite" else search_messages_pg
        return await self.db.run(
            functools.partial(search, query=query, agent=agent, limit=limit, window=window)
        )


def _keys(session_id: str) -> tuple[str]:
    """What a write of one session's rows is keyed by (`Database.write`'s `keys`): on
    PostgreSQL, writes of different sessions run side by side, and those of one session
    (its next seq is max(seq) + 1, its compaction checks the transcript's end) one at a
    time. A write of several sessions (fork, delete, retention) is taken whole."""
    return (f"session:{session_id}",)


def _append_in(
    conn: Conn,
    session_id: str,
    message: Message,
    turn_id: str,
    unless_turn_has: str | None,
) -> tuple[int, Row] | None:
    """The append itself, inside the caller's transaction: the message's seq and the
    session's row as the append left it (None when `unless_turn_has` found the turn's
    message of that role). Three statements at most: on PostgreSQL each is a round trip."""
    if unless_turn_has is not None and turn_id:
        exists = conn.execute(
            "SELECT 1 FROM messages WHERE session_id = ? AND turn_id = ? AND role = ?",
            (session_id, turn_id, unless_turn_has),
        ).fetchone()
        if exists:
            return None
    now = time.time()
    blocks = json.dumps(redact_blocks(message.to_json()), separators=(",", ":"), ensure_ascii=False)
    # The next seq is read by the INSERT itself (one writer per session: the caller's
    # transaction, or its key on PostgreSQL).
    seq = conn.execute(
        "INSERT INTO messages(session_id, seq, role, model, blocks, turn_id, created_at)"
        " SELECT ?, coalesce(max(seq) + 1, 0), ?, ?, ?, ?, ? FROM messages WHERE session_id = ?"
        " RETURNING seq",
        (session_id, message.role, message.model, blocks, turn_id, now, session_id),
    ).fetchone()[0]
    title = _title_from(message) if message.role == "user" else ""
    # A first message's title only where there is none (both CASEs read the old title).
    session = conn.execute(
        "UPDATE sessions SET updated_at = ?,"
        " title = CASE WHEN title = '' AND ? <> '' THEN ? ELSE title END,"
        " title_source = CASE WHEN title = '' AND ? <> '' THEN 'first_message'"
        " ELSE title_source END"
        " WHERE id = ? RETURNING *",
        (now, title, title, title, session_id),
    ).fetchone()
    return int(seq), session


def _view_in(conn: Conn, session_id: str) -> TranscriptView:
    """The view, inside the caller's transaction."""
    compaction = _latest_compaction_in(conn, session_id)
    first = compaction.first_kept_seq if compaction else 0
    rows = conn.execute(
        "SELECT seq, role, model, blocks, turn_id, created_at FROM messages"
        " WHERE session_id = ? AND seq >= ? ORDER BY seq",
        (session_id, first),
    ).fetchall()
    kept = [m for m in (_stored(r) for r in rows) if m is not None]
    if rows:  # the last row read, even one too corrupt to keep, is the transcript's end
        last = int(rows[-1]["seq"])
    else:
        last = int(
            conn.execute(
                "SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
        )
    return TranscriptView(compaction, kept, last)


def _latest_compaction_in(conn: Conn, session_id: str) -> Compaction | None:
    row = conn.execute(
        "SELECT * FROM compactions WHERE session_id = ? ORDER BY id DESC LIMIT 1", (session_id,)
    ).fetchone()
    return Compaction.from_row(row) if row else None


def _fork_point(rows: list[Row], upto_seq: int | None) -> int | None:
    """The seq of the last message a fork copies: at most `upto_seq`, and never one that
    leaves a tool call's result behind. None copies nothing.

    A call with no result that later messages went past was interrupted (repair answers
    it on load, in the fork as in the source): the copy may end after it. A call in the
    source's last message may still get its result: the copy ends before it.
    """
    answered_at: dict[str, int] = {}
    calls: list[tuple[int, list[str]]] = []
    for row in rows:
        ids: list[str] = []
        try:
            blocks = json.loads(row["blocks"])
        except ValueError:
            blocks = []
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                ids.append(str(block.get("tool_use_id")))
            elif block.get("type") == "tool_result":
                answered_at.setdefault(str(block.get("tool_use_id")), row["seq"])
        calls.append((row["seq"], ids))
    last: int | None = None
    final = calls[-1][0] if calls else -1
    # The seq by which every call made so far has its result.
    pending_until = -1
    for seq, ids in calls:
        if upto_seq is not None and seq > upto_seq:
            break
        unanswered = -1 if seq < final else final + 1
        for call_id in ids:
            pending_until = max(pending_until, answered_at.get(call_id, unanswered))
        if pending_until <= seq:
            last = seq
    return last


def _title_from(message: Message) -> str:
    """A first-message title: the first line of the first text block (the user's words;
    context blocks are not text blocks)."""
    for block in message.blocks:
        if isinstance(block, TextBlock) and block.text.strip():
            return block.text.strip().splitlines()[0][:80]
    return ""


def legacy_context(role: str, raw: list[Any]) -> list[Any]:
    """Stored blocks with the time and todo notes older versions wrote as text (after a
    user's words) as the context blocks they are now; other blocks unchanged."""
    if role != "user":
        return raw
    fixed = list(raw)
    for index, block in enumerate(raw[1:], start=1):
        if not isinstance(block, dict) or block.get("type") != "text":
            continue
        text = block.get("text")
        if not isinstance(text, str):
            continue
        if text.startswith(LEGACY_TIME_PREFIX) and text.endswith("]"):
            fixed[index] = {"type": "context", "kind": "time", "text": text}
        elif text.startswith(LEGACY_TODO_PREFIX):
            fixed[index] = {"type": "context", "kind": "todo", "text": text}
    return fixed


def _stored(row: Row) -> StoredMessage | None:
    try:
        raw = json.loads(row["blocks"])
        if not isinstance(raw, list):
            raise ValueError("blocks is not a list")
        raw = legacy_context(row["role"], raw)
        blocks = [block_from_json(b) for b in raw]
    except (ValueError, TypeError) as exc:
        import logging

        logging.getLogger(__name__).error(
            "transcripts.db: message seq %s is corrupt (%s); skipped", row["seq"], exc
        )
        return None
    message = Message(row["role"], blocks, row["model"])
    return StoredMessage(row["seq"], message, row["turn_id"], row["created_at"], raw)


def plain_text_message(role: Role, text: str) -> Message:
    """A one-block text message."""
    return Message(role, [TextBlock(text)])
