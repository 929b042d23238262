"""memory.db: the search index over one agent's note files, and what follows them.

The files are the truth; this index is rebuilt from them when deleted. `sync` compares
each file's (mtime, size) with its row and rewrites only the rows that differ, without
opening a write transaction when nothing changed. Search is FTS5 (porter, unicode61)
over title, tags and body: the query's words are quoted and OR-ed, so no input can be an
FTS syntax error, and bm25 weighs title 10, tags 5, body 1.

The same database holds the tables the review and the embeddings use (reviews,
review_runs, embeddings): they are progress and caches, all rebuildable.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from dataclasses import dataclass

from habakkuk.engine.store import Database, Migration, transaction

from .folder_watch import FolderWatch
from .frontmatter import Parsed, parse
from .memory_types import NoteSummary, ReindexStats
from .notes import FileStat, NoteFiles, valid_slug

EMBED_BYTES = 8_000
MAX_QUERY_WORDS = 64

INDEX_MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE notes(
            id INTEGER PRIMARY KEY,
            slug TEXT NOT NULL UNIQUE,
            mtime_ns INTEGER NOT NULL,
            size INTEGER NOT NULL,
            title TEXT NOT NULL,
            tags TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '',
            session TEXT NOT NULL DEFAULT '',
            trust TEXT NOT NULL DEFAULT 'trusted',
            content_hash TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            read_at TEXT
        );
        CREATE INDEX notes_updated ON notes(updated DESC, slug);
        CREATE TABLE note_tags(
            note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY(note_id, tag)
        );
        CREATE INDEX note_tags_tag ON note_tags(tag);
        CREATE VIRTUAL TABLE notes_fts USING fts5(
            title, tags, body, tokenize = 'porter unicode61'
        );
        CREATE TABLE reviews(
            session TEXT PRIMARY KEY, position INTEGER NOT NULL, at TEXT NOT NULL
        );
        CREATE TABLE review_runs(
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            session TEXT NOT NULL DEFAULT '',
            plan TEXT NOT NULL,
            applied INTEGER NOT NULL DEFAULT 0,
            done INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            created TEXT NOT NULL,
            finished TEXT
        );
        CREATE TABLE embeddings(
            model TEXT NOT NULL,
            hash TEXT NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY(model, hash)
        );
        """,
    )
]


def content_hash(text: str) -> str:
    """SHA-256 of a file's whole text (the history's version key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedded_text(title: str, tags: tuple[str, ...], body: str) -> str:
    """What semantic search embeds: title, tags and the body's first 8,000 bytes."""
    head = body.encode("utf-8")[:EMBED_BYTES].decode("utf-8", "ignore")
    return f"{title}\n{', '.join(tags)}\n{head}"


def text_hash(title: str, tags: tuple[str, ...], body: str) -> str:
    """SHA-256 of `embedded_text`: the embeddings cache key."""
    return hashlib.sha256(embedded_text(title, tags, body).encode("utf-8")).hexdigest()


def fts_query(text: str) -> str:
    """The query's words, each quoted, OR-ed: "" when it has no words."""
    words = re.findall(r"\w+", text.replace("\x00", " "))[:MAX_QUERY_WORDS]
    return " OR ".join(f'"{word}"' for word in words)


@dataclass(frozen=True)
class Seen:
    """A file change a sync noticed (for the history's hand-edit records).

    `before_hash` is "" for a new file; `text` is None for a deleted one.
    """

    slug: str
    before_hash: str
    text: str | None


@dataclass(frozen=True)
class SyncResult:
    stats: ReindexStats
    seen: list[Seen]
    first_build: bool  # the index was empty: versions are recorded, not changes


def summary(row: sqlite3.Row) -> NoteSummary:
    """A notes row as the listing value."""
    return NoteSummary(
        slug=row["slug"],
        title=row["title"],
        tags=tuple(json.loads(row["tags"])),
        created=row["created"],
        updated=row["updated"],
        source=row["source"],
        session=row["session"],
        trust="untrusted" if row["trust"] == "untrusted" else "trusted",
    )


class Index:
    """The index of one agent's notes (its Database runs every call on one thread)."""

    def __init__(self, db: Database, files: NoteFiles, watch: FolderWatch | None = None):
        self.db = db
        self.files = files
        # Names the kernel saw change since the last sync (None from it: scan them all).
        # The first sync always scans: it is the baseline the watch's events start from.
        self.watch = watch
        self._scanned = False

    # -- keeping up with the files -------------------------------------------------------

    async def sync(self, *, full: bool = False, only: tuple[str, ...] = ()) -> SyncResult:
        """Reindex the files whose (mtime, size) differ from their rows; drop gone ones.

        `only`: look at these slugs alone (before a write to them: a hand edit of the
        note being replaced is recorded as such, without a scan of the whole folder).
        """
        return await self.db.run(lambda conn: self._sync(conn, full, only))

    def _sync(self, conn: sqlite3.Connection, full: bool, only: tuple[str, ...]) -> SyncResult:
        started = time.perf_counter()
        built = conn.execute("SELECT 1 FROM meta WHERE key = 'built'").fetchone() is not None
        if not built or full:
            only = ()
            self._scanned = True  # a whole scan: the watch's events count from here
            if self.watch is not None:
                self.watch.changed()
        elif not only:
            watched = self._watched_changes()
            if watched == ():
                elapsed = time.perf_counter() - started
                return SyncResult(ReindexStats(0, 0, 0, elapsed), [], False)
            only = watched or ()
        # Plain tuples, not sqlite3.Row: this runs before every search, over every note.
        cursor = conn.cursor()
        cursor.row_factory = None
        sql = "SELECT slug, mtime_ns, size, content_hash FROM notes"
        if only:
            sql += f" WHERE slug IN ({', '.join('?' for _ in only)})"
        rows = {
            slug: (mtime_ns, size, digest)
            for slug, mtime_ns, size, digest in cursor.execute(sql, only)
        }
        if only:
            files = [item for slug in only if (item := self.files.stat(slug)) is not None]
        else:
            files = self.files.scan()
        present = {f.slug for f in files}
        changed = [
            f
            for f in files
            if full or rows.get(f.slug, (None, None, ""))[:2] != (f.mtime_ns, f.size)
        ]
        gone = [slug for slug in rows if slug not in present]
        if not changed and not gone and built and not full:
            elapsed = time.perf_counter() - started
            return SyncResult(ReindexStats(len(files), 0, 0, elapsed), [], False)
        loaded: list[tuple[FileStat, str]] = []
        for stat in changed:
            read = self.files.read(stat.slug)
            if read is not None:
                loaded.append((stat, read[0]))
        seen: list[Seen] = []
        with transaction(conn):
            if full:
                conn.execute("DELETE FROM notes_fts")
                conn.execute("DELETE FROM notes")
            for stat, text in loaded:
                before = rows.get(stat.slug, (0, 0, ""))[2]
                new_hash = self._upsert(conn, stat, text)
                if new_hash != before:
                    seen.append(Seen(stat.slug, before, text))
            for slug in gone:
                self._remove(conn, slug)
                seen.append(Seen(slug, rows[slug][2], None))
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('built', '1')")
        elapsed = time.perf_counter() - started
        stats = ReindexStats(len(files), len(loaded), len(gone), elapsed)
        return SyncResult(stats, seen, not built)

    def _watched_changes(self) -> tuple[str, ...] | None:
        """The slugs to look at: () when the watch saw nothing, None for a full scan."""
        if self.watch is None:
            return None
        names = self.watch.changed()
        if names is None or not self._scanned:
            self._scanned = True
            return None
        slugs = (n[:-3] for n in names if n.endswith(".md") and not n.startswith("."))
        return tuple(sorted(slug for slug in slugs if valid_slug(slug)))

    def _upsert(self, conn: sqlite3.Connection, stat: FileStat, text: str) -> str:
        parsed: Parsed = parse(text, stat.slug, stat.mtime_ns / 1e9)
        digest = content_hash(text)
        values = (
            stat.mtime_ns,
            stat.size,
            parsed.title,
            json.dumps(list(parsed.tags)),
            parsed.created,
            parsed.updated,
            parsed.source,
            parsed.session,
            parsed.trust,
            digest,
            text_hash(parsed.title, parsed.tags, parsed.body),
        )
        row = conn.execute("SELECT id FROM notes WHERE slug = ?", (stat.slug,)).fetchone()
        if row is None:
            cursor = conn.execute(
                "INSERT INTO notes(mtime_ns, size, title, tags, created, updated, source,"
                " session, trust, content_hash, text_hash, slug)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, stat.slug),
            )
            note_id = int(cursor.lastrowid or 0)
        else:
            note_id = int(row["id"])
            conn.execute(
                "UPDATE notes SET mtime_ns = ?, size = ?, title = ?, tags = ?, created = ?,"
                " updated = ?, source = ?, session = ?, trust = ?, content_hash = ?,"
                " text_hash = ? WHERE id = ?",
                (*values, note_id),
            )
            conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (note_id,))
            conn.execute("DELETE FROM note_tags WHERE note_id = ?", (note_id,))
        conn.execute(
            "INSERT INTO notes_fts(rowid, title, tags, body) VALUES (?, ?, ?, ?)",
            (note_id, parsed.title, " ".join(parsed.tags), parsed.body),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO note_tags(note_id, tag) VALUES (?, ?)",
            [(note_id, tag) for tag in parsed.tags],
        )
        return digest

    def _remove(self, conn: sqlite3.Connection, slug: str) -> None:
        row = conn.execute("SELECT id FROM notes WHERE slug = ?", (slug,)).fetchone()
        if row is not None:
            conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (row["id"],))
            conn.execute("DELETE FROM notes WHERE id = ?", (row["id"],))

    async def put(self, slug: str, text: str, mtime_ns: int, size: int) -> None:
        """Index a file the service has just written (so the next sync sees no change)."""
        stat = FileStat(slug, mtime_ns, size)
        await self.db.write(lambda conn: self._upsert(conn, stat, text))

    async def drop(self, slug: str) -> None:
        """Forget the row of a note the service has just moved away."""
        await self.db.write(lambda conn: self._remove(conn, slug))

    async def mark_read(self, slug: str, at: str) -> None:
        """Remember when a note was last read (the nightly pass archives unread notes)."""
        await self.db.write(
            lambda conn: conn.execute("UPDATE notes SET read_at = ? WHERE slug = ?", (at, slug))
        )

    # -- reading ---------------------------------------------------------------------------

    async def listing(self, limit: int, offset: int) -> tuple[list[NoteSummary], int]:
        """Notes newest (updated) first, and how many there are."""

        def _list(conn: sqlite3.Connection) -> tuple[list[NoteSummary], int]:
            rows = conn.execute(
                "SELECT * FROM notes ORDER BY updated DESC, mtime_ns DESC, slug LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
            total = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
            return [summary(r) for r in rows], int(total)

        return await self.db.run(_list)

    async def search(
        self, query: str, tags: tuple[str, ...], limit: int
    ) -> list[tuple[NoteSummary, str, float]]:
        """(note, snippet, score) best first; with no words, the tagged notes newest first."""
        match = fts_query(query)
        wanted = tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip()))
        if not match and not wanted:
            return []
        tag_sql = ""
        tag_args: tuple[object, ...] = ()
        if wanted:
            marks = ", ".join("?" for _ in wanted)
            tag_sql = (
                f" AND n.id IN (SELECT note_id FROM note_tags WHERE tag IN ({marks})"
                " GROUP BY note_id HAVING count(*) = ?)"
            )
            tag_args = (*wanted, len(wanted))

        def _search(conn: sqlite3.Connection) -> list[tuple[NoteSummary, str, float]]:
            if match:
                # Rank first, snippets after: snippet() over every matching row of 10,000
                # notes is most of the cost, and only `limit` of them are shown.
                ranked = conn.execute(
                    "SELECT notes_fts.rowid, bm25(notes_fts, 10.0, 5.0, 1.0) AS score"
                    " FROM notes_fts"
                    f" WHERE notes_fts MATCH ?{tag_sql.replace('n.id', 'notes_fts.rowid')}"
                    " ORDER BY score LIMIT ?",
                    (match, *tag_args, limit),
                ).fetchall()
                if not ranked:
                    return []
                ids = [int(r[0]) for r in ranked]
                marks = ", ".join("?" for _ in ids)
                by_id = {
                    int(r["id"]): r
                    for r in conn.execute(
                        "SELECT n.*, snippet(notes_fts, 2, '[', ']', '…', 16) AS body_snip,"
                        " snippet(notes_fts, -1, '[', ']', '…', 16) AS snip"
                        " FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid"
                        f" WHERE notes_fts MATCH ? AND notes_fts.rowid IN ({marks})",
                        (match, *ids),
                    )
                }
                found = [(by_id[i], -float(r[1])) for i, r in zip(ids, ranked, strict=True)]
                # Equal scores in slug order, so a listing is stable between calls.
                found.sort(key=lambda item: (-item[1], item[0]["slug"]))
                # The body's own snippet when the body matched: it says more than the title.
                return [
                    (
                        summary(r),
                        r["body_snip"] if "[" in r["body_snip"] else r["snip"],
                        score,
                    )
                    for r, score in found
                ]
            rows = conn.execute(
                "SELECT n.*, substr(f.body, 1, 160) AS snip FROM notes n"
                " JOIN notes_fts f ON f.rowid = n.id"
                f" WHERE 1{tag_sql} ORDER BY n.updated DESC, n.mtime_ns DESC, n.slug LIMIT ?",
                (*tag_args, limit),
            ).fetchall()
            return [(summary(r), " ".join(str(r["snip"]).split()), 0.0) for r in rows]

        return await self.db.run(_search)
