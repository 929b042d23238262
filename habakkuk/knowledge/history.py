"""history.db: every change to an agent's notes, USER.md and IDENTITY.md, and proposals.

Its own file, next to memory.db, so deleting the index (which rebuilds) never loses the
history. Each version's text is kept once per content (versions, by SHA-256); a change
row names the versions before and after, who made it, in which session and tool, and
whether the turn was tainted. `current` remembers the version each file was last seen
with, which is how a hand edit is recorded with what it replaced.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import secrets
import sqlite3
from dataclasses import dataclass

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.store import Migration, SqliteDatabase, transaction

from .frontmatter import now, rfc3339
from .index import content_hash
from .memory_types import Change, ChangeKind, Proposal, ProposalAction, Provenance

HISTORY_MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE versions(hash TEXT PRIMARY KEY, content TEXT NOT NULL);
        CREATE TABLE current(
            path TEXT PRIMARY KEY,
            hash TEXT NOT NULL,
            mtime_ns INTEGER NOT NULL DEFAULT 0,
            size INTEGER NOT NULL DEFAULT -1
        );
        CREATE TABLE changes(
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            path TEXT NOT NULL,
            op TEXT NOT NULL,
            old_hash TEXT NOT NULL,
            new_hash TEXT NOT NULL,
            by TEXT NOT NULL,
            tool TEXT NOT NULL DEFAULT '',
            session TEXT NOT NULL DEFAULT '',
            tainted INTEGER NOT NULL DEFAULT 0,
            note TEXT NOT NULL DEFAULT '',
            restores TEXT NOT NULL DEFAULT '',
            at TEXT NOT NULL
        );
        CREATE INDEX changes_name ON changes(name, seq);
        CREATE INDEX changes_at ON changes(at);
        CREATE TABLE proposals(
            id TEXT PRIMARY KEY,
            action TEXT NOT NULL,
            name TEXT NOT NULL,
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            reason TEXT NOT NULL,
            by TEXT NOT NULL,
            session TEXT NOT NULL DEFAULT '',
            at TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open',
            resolved_at TEXT
        );
        """,
    )
]

_SINCE = re.compile(r"(\d+)\s*([dh])")


def parse_since(value: str, *, at: dt.datetime | None = None) -> str:
    """`since` ("7d", "12h" or a date) as an RFC 3339 lower bound; HabakkukError otherwise."""
    text = value.strip().lower()
    moment = at or dt.datetime.now(dt.UTC)
    matched = _SINCE.fullmatch(text)
    if matched:
        amount = int(matched.group(1))
        delta = dt.timedelta(days=amount) if matched.group(2) == "d" else dt.timedelta(hours=amount)
        return rfc3339(moment - delta)
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise HabakkukError(
            f"since {value!r}: expected a span such as 7d or 12h, or a date (2026-11-01)"
        ) from None
    return rfc3339(parsed)


def _change(agent: str, row: sqlite3.Row) -> Change:
    return Change(
        id=row["id"],
        agent=agent,
        kind=row["kind"],
        name=row["name"],
        path=row["path"],
        op=row["op"],
        old_hash=row["old_hash"],
        new_hash=row["new_hash"],
        by=row["by"],
        tool=row["tool"],
        session=row["session"],
        tainted=bool(row["tainted"]),
        note=row["note"],
        restores=row["restores"],
        at=row["at"],
    )


def _proposal(agent: str, row: sqlite3.Row) -> Proposal:
    return Proposal(
        id=row["id"],
        agent=agent,
        action=row["action"],
        name=row["name"],
        title=row["title"],
        content=row["content"],
        reason=row["reason"],
        by=row["by"],
        session=row["session"],
        at=row["at"],
    )


def unified_diff(path: str, before: str | None, after: str | None) -> str:
    """The change as a unified diff (a/path, b/path; /dev/null for a missing side)."""
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile=f"a/{path}" if before is not None else "/dev/null",
        tofile=f"b/{path}" if after is not None else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class Stat:
    mtime_ns: int
    size: int


class History:
    """The history of one agent's memory files."""

    def __init__(self, db: SqliteDatabase, agent: str):
        self.db = db
        self.agent = agent

    # -- recording ---------------------------------------------------------------------

    async def record(
        self,
        *,
        kind: ChangeKind,
        name: str,
        path: str,
        before: str | None,
        after: str | None,
        provenance: Provenance,
        restores: str = "",
        stat: Stat | None = None,
    ) -> Change | None:
        """Record one change (None when before and after are the same text, or when it
        is recorded already).

        A note's change is recorded before its file is written (see NoteStore), so a
        crash loses no record: if the file was never written, the repeated change
        replaces the one recorded; if the file was written but not indexed, the sync
        that notices it finds it recorded.
        """
        if before == after:
            return None

        def _record(conn: sqlite3.Connection) -> Change | None:
            with transaction(conn):
                current = conn.execute(
                    "SELECT hash FROM current WHERE path = ?", (path,)
                ).fetchone()
                old_hash = content_hash(before) if before is not None else ""
                new_hash = content_hash(after) if after is not None else ""
                if current is not None and current["hash"] == new_hash:
                    # Recorded already: a note's change is recorded before its file is
                    # written, and a crash before the index row makes the next sync see
                    # the same text again.
                    return None
                unlanded = self._unlanded(conn, path, current, old_hash)
                if unlanded is not None:
                    # The last change never reached the file (a crash between recording
                    # and writing): this one takes its place instead of following it.
                    conn.execute("DELETE FROM changes WHERE seq = ?", (unlanded,))
                return self._insert(
                    conn, kind, name, path, before, after, provenance, restores, stat
                )

        return await self.db.run(_record)

    def _insert(
        self,
        conn: sqlite3.Connection,
        kind: ChangeKind,
        name: str,
        path: str,
        before: str | None,
        after: str | None,
        provenance: Provenance,
        restores: str,
        stat: Stat | None,
    ) -> Change:
        old_hash = self._keep(conn, before)
        new_hash = self._keep(conn, after)
        op = "created" if before is None else "deleted" if after is None else "updated"
        change_id = secrets.token_hex(8)
        conn.execute(
            "INSERT INTO changes(id, kind, name, path, op, old_hash, new_hash, by, tool,"
            " session, tainted, note, restores, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                change_id,
                kind,
                name,
                path,
                op,
                old_hash,
                new_hash,
                provenance.by,
                provenance.tool,
                provenance.session,
                int(provenance.tainted),
                provenance.note,
                restores,
                now(),
            ),
        )
        self._set_current(conn, path, new_hash, stat)
        row = conn.execute("SELECT * FROM changes WHERE id = ?", (change_id,)).fetchone()
        return _change(self.agent, row)

    async def withdraw(self, change: Change) -> None:
        """Take back a change whose file could not be written (the disk is full, say):
        the history goes back to what the file still holds."""

        def _withdraw(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                conn.execute("DELETE FROM changes WHERE id = ?", (change.id,))
                self._set_current(conn, change.path, change.old_hash, None)

        await self.db.run(_withdraw)

    @staticmethod
    def _unlanded(
        conn: sqlite3.Connection, path: str, current: sqlite3.Row | None, on_disk: str
    ) -> int | None:
        """The seq of the path's last change if the file does not hold its outcome but
        still holds what it started from (it was recorded, then never written)."""
        if current is None or current["hash"] == on_disk:
            return None
        last = conn.execute(
            "SELECT seq, old_hash, new_hash FROM changes WHERE path = ? ORDER BY seq DESC LIMIT 1",
            (path,),
        ).fetchone()
        if last is None or last["new_hash"] != current["hash"] or last["old_hash"] != on_disk:
            return None
        return int(last["seq"])

    @staticmethod
    def _keep(conn: sqlite3.Connection, text: str | None) -> str:
        if text is None:
            return ""
        digest = content_hash(text)
        conn.execute("INSERT OR IGNORE INTO versions(hash, content) VALUES (?, ?)", (digest, text))
        return digest

    @staticmethod
    def _set_current(conn: sqlite3.Connection, path: str, digest: str, stat: Stat | None) -> None:
        if not digest:
            conn.execute("DELETE FROM current WHERE path = ?", (path,))
            return
        conn.execute(
            "INSERT OR REPLACE INTO current(path, hash, mtime_ns, size) VALUES (?, ?, ?, ?)",
            (path, digest, stat.mtime_ns if stat else 0, stat.size if stat else -1),
        )

    async def observe(self, items: list[tuple[str, str]]) -> None:
        """Keep (path, text) as each file's current version without recording a change
        (the index's first build: there is nothing it could have replaced)."""
        if not items:
            return

        def _observe(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                for path, text in items:
                    self._set_current(conn, path, self._keep(conn, text), None)

        await self.db.run(_observe)

    async def version(self, digest: str) -> str | None:
        """The text of a version, or None ("" hash, or pruned)."""
        if not digest:
            return None
        row = await self.db.fetchone("SELECT content FROM versions WHERE hash = ?", (digest,))
        return None if row is None else str(row["content"])

    async def notice_file(
        self, *, kind: ChangeKind, name: str, path: str, text: str | None, stat: Stat | None
    ) -> Change | None:
        """Compare a file outside the index (USER.md, IDENTITY.md) with its last version.

        A different text is a hand edit; the first sight of a file records only its
        version. Nothing is written when the file's (mtime, size) has not moved.
        """

        def _notice(conn: sqlite3.Connection) -> Change | None:
            row = conn.execute(
                "SELECT hash, mtime_ns, size FROM current WHERE path = ?", (path,)
            ).fetchone()
            if row is None and text is None:
                return None
            if (
                row is not None
                and stat is not None
                and (row["mtime_ns"], row["size"])
                == (
                    stat.mtime_ns,
                    stat.size,
                )
            ):
                return None
            digest = content_hash(text) if text is not None else ""
            with transaction(conn):
                if row is None:
                    self._set_current(conn, path, self._keep(conn, text), stat)
                    return None
                if digest == row["hash"]:
                    self._set_current(conn, path, digest, stat)
                    return None
                before_row = conn.execute(
                    "SELECT content FROM versions WHERE hash = ?", (row["hash"],)
                ).fetchone()
                before = None if before_row is None else str(before_row["content"])
                return self._insert(
                    conn, kind, name, path, before, text, Provenance(by="hand"), "", stat
                )

        return await self.db.run(_notice)

    async def prune(self, days: float) -> int:
        """Drop changes older than `days` and the versions nothing refers to any more."""
        if days <= 0:
            return 0
        cutoff = rfc3339(dt.datetime.now(dt.UTC) - dt.timedelta(days=days))

        def _prune(conn: sqlite3.Connection) -> int:
            old = conn.execute("SELECT count(*) FROM changes WHERE at < ?", (cutoff,)).fetchone()
            if not old[0]:
                return 0
            with transaction(conn):
                conn.execute("DELETE FROM changes WHERE at < ?", (cutoff,))
                conn.execute(
                    "DELETE FROM versions WHERE hash NOT IN (SELECT old_hash FROM changes)"
                    " AND hash NOT IN (SELECT new_hash FROM changes)"
                    " AND hash NOT IN (SELECT hash FROM current)"
                )
            return int(old[0])

        return await self.db.run(_prune)

    # -- reading -----------------------------------------------------------------------

    async def changes(
        self,
        *,
        name: str | None = None,
        kind: ChangeKind | None = None,
        since: str | None = None,
        limit: int = 50,
    ) -> list[Change]:
        """Changes newest first."""
        where: list[str] = []
        args: list[object] = []
        if name:
            where.append("name = ?")
            args.append(name)
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if since:
            where.append("at >= ?")
            args.append(parse_since(since))
        sql = "SELECT * FROM changes"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(max(1, min(int(limit), 1000)))
        rows = await self.db.fetchall(sql, args)
        return [_change(self.agent, row) for row in rows]

    async def change(self, change_id: str) -> Change:
        """The change whose id starts with `change_id` (four characters at least)."""
        prefix = change_id.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{4,32}", prefix):
            raise HabakkukError(
                f"change {change_id[:40]!r}: give at least four characters of its id"
            )
        rows = await self.db.fetchall(
            "SELECT * FROM changes WHERE id LIKE ? ORDER BY seq DESC LIMIT 2", (prefix + "%",)
        )
        if not rows:
            raise NotFound(f"memory: no change {change_id!r} in {self.agent}'s history")
        if len(rows) > 1:
            raise HabakkukError(
                f"change {change_id!r}: more than one change starts so; give more characters"
            )
        return _change(self.agent, rows[0])

    # -- proposals ---------------------------------------------------------------------

    async def propose(
        self,
        *,
        action: ProposalAction,
        name: str,
        title: str,
        content: str,
        reason: str,
        provenance: Provenance,
    ) -> Proposal:
        """Store a change the review may not make alone; an equal open one is reused."""

        def _propose(conn: sqlite3.Connection) -> Proposal:
            with transaction(conn):
                same = conn.execute(
                    "SELECT * FROM proposals WHERE status = 'open' AND action = ? AND name = ?"
                    " AND title = ? AND content = ?",
                    (action, name, title, content),
                ).fetchone()
                if same is not None:
                    return _proposal(self.agent, same)
                proposal_id = "prop_" + secrets.token_hex(6)
                conn.execute(
                    "INSERT INTO proposals(id, action, name, title, content, reason, by,"
                    " session, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        proposal_id,
                        action,
                        name,
                        title,
                        content,
                        reason,
                        provenance.by,
                        provenance.session,
                        now(),
                    ),
                )
                row = conn.execute(
                    "SELECT * FROM proposals WHERE id = ?", (proposal_id,)
                ).fetchone()
                return _proposal(self.agent, row)

        return await self.db.run(_propose)

    async def open_proposals(self) -> list[Proposal]:
        rows = await self.db.fetchall(
            "SELECT * FROM proposals WHERE status = 'open' ORDER BY at, rowid"
        )
        return [_proposal(self.agent, row) for row in rows]

    async def open_proposal(self, proposal_id: str) -> Proposal:
        row = await self.db.fetchone(
            "SELECT * FROM proposals WHERE id = ? AND status = 'open'", (proposal_id,)
        )
        if row is None:
            raise NotFound(f"memory of {self.agent}: no open proposal {proposal_id!r}")
        return _proposal(self.agent, row)

    async def close_proposal(self, proposal_id: str, status: str) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE proposals SET status = ?, resolved_at = ? WHERE id = ?",
                (status, now(), proposal_id),
            )
        )
