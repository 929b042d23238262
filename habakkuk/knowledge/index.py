"""memory.db: the search index over one agent's note files, and what follows them.

The files are the truth; this index is rebuilt from them when deleted. `sync` compares
each file's (mtime, size) with its row and rewrites only the rows that differ, without
opening a write transaction when nothing changed. Search is FTS5 (porter, unicode61)
over title, tags and body: the query's words are quoted and OR-ed, so no input can be an
FTS syntax error.

Search ranks the newest MEMORY_WINDOW matching notes (by row: the order notes were
first indexed) by what that window holds, not with bm25(), whose statistics over every
match grew with the index (8 ms at 10,000 notes, 99 ms at 100,000). Each query word a
note holds adds its weight, ten times in the title, five times in the tags, once in the
body, and a word held by fewer notes of the window weighs more (ln(1 + window / notes
holding it)); equal scores go to the newest note.

The window is 100 notes, not the 2,000 messages of session search: each query word is
looked up once per column over the window's rows (three walks over it per word after
the window's own, where session search makes one or two). A title or tag match is a
window of its own (the newest 100 notes holding the word in that column), so an older
note titled or tagged with the word is still ranked (on its title and tag weights);
what the window costs the ranking is an older note holding the words only in its body
once 100 newer notes hold one of them. A word held by fewer notes than the window
costs what it is held by, up to the window (in each column).

The cost of a search is the rows its windows hold, about 0.45 us each (the lookup, the
row to Python, its score), the same on 10,000 notes as on 1,000,000: nothing reads
the index beyond them, and no page, join, sort or statistic grows with it. A word held
by fewer notes than the window costs less while its windows fill, then stays flat:
with a window of 200, a word held by 85 of 10,000 notes (2 of them in their title) read
85 + 83 + 2 rows there and 200 + 188 + 200 (window, body, title) on 1,000,000 notes:
2.5x the time run again and again (0.13 against 0.32 ms), 2.2x from cold CPU caches
(0.46 against 1.01 ms, search_bench at a load of 10). With 100 the big memory reads
100 + 94 + 100: 1.4x and 1.2x (0.41 against 0.50 ms cold), the title window most of
what is left; a common word costs about half what it did, at any size.

The title and tag windows are read from FTS5 tables of their own (note_titles_fts,
note_tags_fts, one column each): a column filter on notes_fts ("title : word") reads
every note holding the word in any column to find those holding it there, and all of
them for a word in no tag, so a rare word cost 2.5-2.9x as much on 100,000 notes as on
10,000 and 7-20x on 1,000,000 (1.5-1.6x and 1.5-1.8x with the tables; a word held by
fewer notes than the window in the small memory, 2-2.2x and 2.5x: its windows fill).
Every write adds an FTS5 segment and FTS5 merges them as a log, a few per level, each
visited by every lookup: a first build or a full reindex ends by merging each table
into one (`Index.compact`).

The same database holds the tables the review and the embeddings use (reviews,
review_runs, embeddings): they are progress and caches, all rebuildable.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import heapq
import json
import math
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass

from habakkuk.engine.snippets import SNIPPET_SCAN, Highlighter, opening
from habakkuk.engine.store import Migration, SqliteDatabase, transaction

from .folder_watch import FolderWatch
from .frontmatter import Parsed, parse
from .memory_types import NoteSummary, ReindexStats
from .notes import READ_MAX_BYTES, FileStat, NoteFiles, partial_size, valid_slug

EMBED_BYTES = 8_000
MAX_QUERY_WORDS = 64
# Search ranks the newest this many matching notes (its cost grows with it, not with
# the index). Each query word costs one FTS5 lookup per column within the window.
MEMORY_WINDOW = 100
COLUMN_WEIGHTS = (("title", 10.0), ("tags", 5.0), ("body", 1.0))
# The FTS5 tables a title or a tag lookup reads (each of one column): see migration 2.
COLUMN_TABLES = {"title": "note_titles_fts", "tags": "note_tags_fts"}
# Every FTS5 table holding a note's words, keyed by notes.id (rowid).
FTS_TABLES = ("notes_fts", *COLUMN_TABLES.values())
# A compaction merges each FTS5 table's segments into one in steps of this many pages
# (a few ms on an idle 2-core machine, 35 ms at a load of 16): a search or a write waits
# at most one step.
MERGE_PAGES = 64
# One write transaction of a sync indexes at most this much text, or this many files:
# FTS5 tokenizes on the database thread, 2-5 ms for 128 KB on a small machine.
BATCH_BYTES = 128 * 1024
BATCH_FILES = 500

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
    ),
    # A title and a tag window of their own, each over its own FTS5 table: a column
    # filter on notes_fts ("title : word") walks every note holding the word in any
    # column to find the ones holding it there, and a rare word held in no tag walked
    # all of them (7,060 of 100,000 notes, 0.17 ms; 684 of 10,000, 0.03 ms). Here a
    # lookup reads only the notes holding the word in that column, at most a window.
    # No column sizes: they serve bm25(), which nothing runs on these tables.
    Migration(
        2,
        """
        CREATE VIRTUAL TABLE note_titles_fts USING fts5(
            title, tokenize = 'porter unicode61', columnsize = 0
        );
        CREATE VIRTUAL TABLE note_tags_fts USING fts5(
            tags, tokenize = 'porter unicode61', columnsize = 0
        );
        INSERT INTO note_titles_fts(rowid, title) SELECT rowid, title FROM notes_fts;
        INSERT INTO note_tags_fts(rowid, tags) SELECT rowid, tags FROM notes_fts;
        """,
    ),
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


def note_snippet(highlighter: Highlighter, row: sqlite3.Row) -> str:
    """A search hit's snippet: around the body's first match (it says more than the
    title), else the title's or the tags', else the body's first words. Bounded work
    whatever the note's size (see snippets.py): `head` is the body's first characters."""
    head = str(row["head"])
    return (
        highlighter.snippet(head)
        or highlighter.snippet(row["title"])
        or highlighter.snippet(" ".join(json.loads(row["tags"])))
        or opening(head)
    )


def query_words(text: str) -> list[str]:
    """The query's words (at most MAX_QUERY_WORDS), each once."""
    words = re.findall(r"\w+", text.replace("\x00", " "))[:MAX_QUERY_WORDS]
    return list(dict.fromkeys(word.lower() for word in words))


def fts_query(text: str) -> str:
    """The query's words, each quoted, OR-ed: "" when it has no words."""
    return " OR ".join(f'"{word}"' for word in query_words(text))


def index_words(conn: sqlite3.Connection, note_id: int, title: str, tags: str, body: str) -> None:
    """Index a note's words (`tags` joined by spaces) in every FTS5 table, as `note_id`."""
    conn.execute(
        "INSERT INTO notes_fts(rowid, title, tags, body) VALUES (?, ?, ?, ?)",
        (note_id, title, tags, body),
    )
    conn.execute("INSERT INTO note_titles_fts(rowid, title) VALUES (?, ?)", (note_id, title))
    conn.execute("INSERT INTO note_tags_fts(rowid, tags) VALUES (?, ?)", (note_id, tags))


def unindex_words(conn: sqlite3.Connection, note_id: int) -> None:
    """Drop a note's words from every FTS5 table."""
    for table in FTS_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (note_id,))


def merge_step(conn: sqlite3.Connection, table: str, pages: int) -> bool:
    """One step of merging `table`'s segments (FTS5's 'merge' command, about `pages`
    pages written; a negative count starts merging every segment into one): whether
    there was work to do."""
    before = conn.total_changes
    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (pages,))
    return conn.total_changes - before >= 2  # FTS5's documented sign of work done


def rank_window(
    conn: sqlite3.Connection,
    query: str,
    *,
    where: str = "",
    args: tuple[object, ...] = (),
    limit: int,
    window: int = MEMORY_WINDOW,
) -> list[tuple[int, float]]:
    """(rowid, score) of the best `limit` of the newest `window` notes matching `query`
    and of the newest `window` holding a query word in their title or tags (and
    `where`, SQL on the notes' rowid with `args`), best first: the rule of the module's
    docstring. Every lookup reads at most a window's rows."""
    match = fts_query(query)
    if not match:
        return []
    # Plain tuples, not sqlite3.Row: up to a window of rows per lookup.
    cursor = conn.cursor()
    cursor.row_factory = None
    found = cursor.execute(
        f"SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?{where} ORDER BY rowid DESC LIMIT ?",
        (match, *args, window),
    ).fetchall()
    inside = [rowid for (rowid,) in found]
    if not inside:
        return []
    oldest = inside[-1]
    held = frozenset(inside)
    scores = dict.fromkeys(inside, 0.0)
    for word in query_words(query):
        # Each lookup as a plain list of rowids: the per-row Python is most of a search.
        found_in: list[tuple[float, list[int]]] = []
        for column, weight in COLUMN_WEIGHTS:
            table = COLUMN_TABLES.get(column)
            if table is None:
                # The body only within the window: a body word alone ranks no older note.
                # Newest first, as the window was read: FTS5 starts at the end of each
                # segment's list and stops at `oldest` (ascending, it read each list up
                # to `oldest`: 0.16 ms against 0.09 ms for the same rows of 100,000 notes
                # in ten segments).
                rows = cursor.execute(
                    "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? AND rowid >= ?"
                    " ORDER BY rowid DESC",
                    (f'{column} : "{word}"', oldest),
                )
                found_in.append((weight, [rowid for (rowid,) in rows if rowid in held]))
            else:
                # A title or tag is a window of its own (the newest `window` notes holding
                # the word there), read from that column's own table: an older note titled
                # with the word is still ranked, and a word held in no title costs nothing.
                rows = cursor.execute(
                    f"SELECT rowid FROM {table} WHERE {table} MATCH ?{where}"
                    " ORDER BY rowid DESC LIMIT ?",
                    (f'"{word}"', *args, window),
                )
                found_in.append((weight, [rowid for (rowid,) in rows]))
        holders = len(set().union(*(rowids for _, rowids in found_in)))
        if holders:
            rarity = math.log(1.0 + len(inside) / holders)
            for weight, rowids in found_in:
                add = weight * rarity
                for rowid in rowids:
                    scores[rowid] = scores.get(rowid, 0.0) + add
    # (score, rowid) pairs compare as the rule orders them: the best score, then newest.
    best = heapq.nlargest(limit, zip(scores.values(), scores.keys(), strict=True))
    return [(rowid, score) for score, rowid in best]


@dataclass(frozen=True)
class Seen:
    """A file change a sync noticed (for the history's hand-edit records).

    `before_hash` is "" for a new file; `text` is None for a deleted one.
    """

    slug: str
    before_hash: str
    text: str | None


@dataclass(frozen=True)
class SyncPlan:
    """What a sync found to do: the rows it compared, the files changed and gone."""

    rows: dict[str, tuple[int, int, str]]  # slug -> (mtime_ns, size, content hash)
    scanned: int
    changed: list[FileStat]
    gone: list[str]
    built: bool  # the index had been built before this sync
    full: bool = False  # every row is rewritten


@dataclass(frozen=True)
class Prepared:
    """A note file read and parsed, ready for its row (the work done off the db thread)."""

    stat: FileStat
    text: str
    parsed: Parsed
    digest: str  # content_hash(text)
    text_digest: str  # text_hash of what is embedded


def prepare(stat: FileStat, text: str) -> Prepared:
    """Parse and hash a note's text for its index row."""
    parsed = parse(text, stat.slug, stat.mtime_ns / 1e9)
    return Prepared(
        stat,
        text,
        parsed,
        content_hash(text),
        text_hash(parsed.title, parsed.tags, parsed.body),
    )


def batches(files: list[FileStat]) -> Iterator[list[FileStat]]:
    """`files` in runs of at most BATCH_BYTES of text (a bigger note alone) or BATCH_FILES."""
    batch: list[FileStat] = []
    size = 0
    for item in files:
        weight = min(item.size, READ_MAX_BYTES)
        if batch and (size + weight > BATCH_BYTES or len(batch) >= BATCH_FILES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += weight
    if batch:
        yield batch


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
        partial=partial_size(int(row["size"])),
    )


class Index:
    """The index of one agent's notes (its SqliteDatabase runs every call on one thread)."""

    def __init__(self, db: SqliteDatabase, files: NoteFiles, watch: FolderWatch | None = None):
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

        The files are read and parsed off the database thread, and written in batches of
        at most BATCH_BYTES of text, each its own transaction: a big note dropped in by
        hand (or ten thousand small ones) never holds the thread that every search, write
        and shutdown of this memory waits for.
        """
        started = time.perf_counter()
        plan = await self.db.run(lambda conn: self._plan(conn, full, only))
        if not plan.changed and not plan.gone and plan.built and not full:
            elapsed = time.perf_counter() - started
            return SyncResult(ReindexStats(plan.scanned, 0, 0, elapsed), [], False)
        seen: list[Seen] = []
        loaded = 0
        for batch in batches(plan.changed):
            prepared = await asyncio.to_thread(self._prepare_files, batch)
            loaded += len(prepared)
            seen += await self.db.run(functools.partial(self._store, plan=plan, batch=prepared))
        seen += await self.db.run(lambda conn: self._finish(conn, plan))
        if not plan.built or plan.full:
            await self.compact()
        elapsed = time.perf_counter() - started
        stats = ReindexStats(plan.scanned, loaded, len(plan.gone), elapsed)
        return SyncResult(stats, seen, not plan.built)

    async def compact(self) -> None:
        """Merge each FTS5 table's segments into one, MERGE_PAGES pages a transaction.

        Every write leaves a segment and FTS5 merges them as a log (a few per level), so
        a lookup visits every segment: a memory built by a sync (batches of notes) of
        100,000 notes had ten, and a lookup of the newest 200 notes holding a word took
        1.4x what it took on 10,000 notes; merged into one, 1.05x. Run after the first
        build and a full reindex: the merge rewrites the whole index (0.4 s for 100,000
        notes on an idle 2-core machine, 2.5 s loaded; a first build of them takes
        longer), in steps each its own transaction, so searches and writes go between.
        A memory that grows a note at a time stays a log of segments (FTS5's automerge).
        """
        for table in FTS_TABLES:
            pages = -MERGE_PAGES
            while await self.db.write(functools.partial(merge_step, table=table, pages=pages)):
                pages = MERGE_PAGES

    def _plan(self, conn: sqlite3.Connection, full: bool, only: tuple[str, ...]) -> SyncPlan:
        """What differs between the files and their rows (stat calls only, no reads)."""
        built = conn.execute("SELECT 1 FROM meta WHERE key = 'built'").fetchone() is not None
        if not built or full:
            only = ()
            self._scanned = True  # a whole scan: the watch's events count from here
            if self.watch is not None:
                self.watch.changed()
        elif not only:
            watched = self._watched_changes()
            if watched == ():
                return SyncPlan({}, 0, [], [], built=True)
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
        return SyncPlan(rows, len(files), changed, gone, built=built, full=full)

    def _prepare_files(self, stats: list[FileStat]) -> list[Prepared]:
        """Read and parse changed files (in a worker thread); a file gone since is left out."""
        prepared = []
        for stat in stats:
            read = self.files.read(stat.slug)
            if read is not None:
                prepared.append(prepare(stat, read.text))
        return prepared

    def _store(
        self, conn: sqlite3.Connection, *, plan: SyncPlan, batch: list[Prepared]
    ) -> list[Seen]:
        """Write one batch of prepared notes in one transaction; the changes it made."""
        seen: list[Seen] = []
        with transaction(conn):
            for item in batch:
                before = plan.rows.get(item.stat.slug, (0, 0, ""))[2]
                self._upsert(conn, item)
                if item.digest != before:
                    seen.append(Seen(item.stat.slug, before, item.text))
        return seen

    def _finish(self, conn: sqlite3.Connection, plan: SyncPlan) -> list[Seen]:
        """Drop the rows of gone files and mark the index built, in one transaction."""
        seen: list[Seen] = []
        with transaction(conn):
            for slug in plan.gone:
                self._remove(conn, slug)
                seen.append(Seen(slug, plan.rows[slug][2], None))
            if plan.full:
                # What no row owns (an index damaged by hand): a rebuild leaves none.
                for table in FTS_TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE rowid NOT IN (SELECT id FROM notes)")
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('built', '1')")
        return seen

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

    def _upsert(self, conn: sqlite3.Connection, item: Prepared) -> None:
        stat, parsed = item.stat, item.parsed
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
            item.digest,
            item.text_digest,
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
            unindex_words(conn, note_id)
            conn.execute("DELETE FROM note_tags WHERE note_id = ?", (note_id,))
        index_words(conn, note_id, parsed.title, " ".join(parsed.tags), parsed.body)
        conn.executemany(
            "INSERT OR IGNORE INTO note_tags(note_id, tag) VALUES (?, ?)",
            [(note_id, tag) for tag in parsed.tags],
        )

    def _remove(self, conn: sqlite3.Connection, slug: str) -> None:
        row = conn.execute("SELECT id FROM notes WHERE slug = ?", (slug,)).fetchone()
        if row is not None:
            unindex_words(conn, int(row["id"]))
            conn.execute("DELETE FROM notes WHERE id = ?", (row["id"],))

    async def put(self, slug: str, text: str, mtime_ns: int, size: int) -> None:
        """Index a file the service has just written (so the next sync sees no change)."""
        item = prepare(FileStat(slug, mtime_ns, size), text)
        await self.db.write(lambda conn: self._upsert(conn, item))

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
        highlighter = Highlighter(query.replace("\x00", " "), max_words=MAX_QUERY_WORDS)
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
                # Rank first, snippets after: only `limit` of the matching rows are shown.
                ranked = rank_window(
                    conn,
                    query,
                    where=tag_sql.replace("n.id", "rowid"),
                    args=tag_args,
                    limit=limit,
                )
                if not ranked:
                    return []
                ids = [rowid for rowid, _ in ranked]
                marks = ", ".join("?" for _ in ids)
                by_id = {
                    int(r["id"]): r
                    for r in conn.execute(
                        "SELECT n.*, substr(f.body, 1, ?) AS head"
                        " FROM notes_fts f JOIN notes n ON n.id = f.rowid"
                        f" WHERE f.rowid IN ({marks})",
                        (SNIPPET_SCAN, *ids),
                    )
                }
                return [
                    (summary(by_id[rowid]), note_snippet(highlighter, by_id[rowid]), score)
                    for rowid, score in ranked
                ]
            rows = conn.execute(
                "SELECT n.*, substr(f.body, 1, 160) AS snip FROM notes n"
                " JOIN notes_fts f ON f.rowid = n.id"
                f" WHERE 1{tag_sql} ORDER BY n.updated DESC, n.mtime_ns DESC, n.slug LIMIT ?",
                (*tag_args, limit),
            ).fetchall()
            return [(summary(r), " ".join(str(r["snip"]).split()), 0.0) for r in rows]

        return await self.db.run(_search)
