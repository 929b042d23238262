"""Search on a small and a big home, the old ranking (bm25() over every match) beside the
new one (a window of the newest matches ranked by what it holds), issue 27 item 2.

Sessions: a 10,000-message and a 1,000,000-message home built by big_home.py (the real
migrations and triggers; the big one takes about two minutes: it is built once into
--big and reused). Planted in both, by rewriting user messages in place (the real
triggers reindex them): a rare word in 40 messages spread over the history, and a rare
phrase in one message near the start. Queries: common words (one and two of big_home's
31 words, each in about 44 % of the messages), rare words, and phrases (the rare old one,
and a common one). Old and new, on the small home and on the big one, run in alternating
rounds, query by query, so the load of a shared machine falls on all four alike.

Memory: the ranking query of memory search on a memory.db of 10,000, 100,000 and
1,000,000 notes (memory_bench.py's words: a few common, many rare), built through the
index's own migrations and writes in the sync's batches, then compacted as the sync's
first build is (the million takes about three minutes and 1 GB: built once into --notes
and reused; --huge-notes 0 skips it). Planted in each, in the oldest note: a rare
phrase. Four rankings: bm25 over every match (before issue 27; up to 100,000 notes, it
takes seconds a query on a million), the window whose title and tag lookups were column
filters on notes_fts (before m27: they walked every note holding the word), the window
as it is with the 200 notes it held before memsearch (a rare word held by fewer than
200 of the 10,000 notes read 3.5x the rows on a million, its windows full), and the
window as it is. The snippets and note rows read after ranking are per hit, the same at
any size (memory_bench.py times the whole service at 10,000 notes).

Prints p50/p95 in ms per query kind and ranking, the homes side by side, and the ratio of
each bigger home's p50 to the smallest's. Each timed search starts from cold CPU caches
(`cold`), and a query runs by one ranking on every home in turn before the next ranking.
--memory-only skips the sessions.
Run: python benchmarks/search_bench.py [--small DIR] [--big DIR] [--rounds N] [--memory-only]
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from _harness import OLD_SESSIONS
from big_home import build
from memory_bench import COMMON, RARE, words

from habakkuk.engine.session_search import SEARCH_WINDOW, search_messages
from habakkuk.engine.store import SqliteDatabase
from habakkuk.knowledge.index import (
    BATCH_FILES,
    COLUMN_WEIGHTS,
    FTS_TABLES,
    INDEX_MIGRATIONS,
    MEMORY_WINDOW,
    MERGE_PAGES,
    fts_query,
    index_words,
    merge_step,
    query_words,
    rank_window,
)

# Memory search before issue 27: bm25 over every matching note.
OLD_MEMORY = (
    "SELECT notes_fts.rowid, bm25(notes_fts, 10.0, 5.0, 1.0) AS score FROM notes_fts"
    " WHERE notes_fts MATCH ? ORDER BY score LIMIT ?"
)
# The memory window before memsearch.
OLD_WINDOW = 200
RARE_WORD = "zephyr"
OLD_PHRASE = "quiet harbour lantern"
SESSION_QUERIES = {
    "common": ["garden", "violin", "deploy backup", "tomato kitchen", "server"],
    "rare": [RARE_WORD, f"{RARE_WORD} garden", "harbour"],
    "old phrase": [f'"{OLD_PHRASE}"'],
    # 21,000 matches in 1M messages, 209 in 10k; 259,669 and 2,573 messages hold both
    # words: the window (of the messages holding every word) is full in both homes.
    "common phrase": ['"garden tomato"'],
    # Three common words, 8 matches in 10k: checked within the window of the messages
    # holding all three, not through the history.
    "rare phr/comm": ['"tomato garden violin"'],
}
MEMORY_QUERIES = {
    "common": ["coffee", "coffee tea", "python server backup"],
    # 710 and 85 matches in 10k notes, 6,979 and 955 in 100k, 68,919 and 9,392 in 1M
    # (the window holds 100); in titles 35 and 2, 301 and 47, 2,914 and 384; in tags none
    # (the tags are common words). papapa fills no window in 10k: it reads fewer rows.
    "rare": [RARE[100], RARE[-1]],
    # Planted in the oldest note's body only: found through every newer note.
    "old phrase": [f'"{OLD_PHRASE}"'],
}


def old_fts_query(text: str) -> str:
    """The old query: every word quoted (quotes dropped: no phrases)."""
    return " ".join(f'"{w}"' for w in text.replace('"', " ").split())


def session_home(root: Path, messages: int) -> Path:
    """transcripts.db of a home of `messages` messages, built and planted once."""
    path = root / "transcripts.db"
    if not path.exists():
        print(f"building {messages:,} messages into {root} ...", flush=True)
        build(root, max(1, messages // 10), messages)
    conn = sqlite3.connect(path, isolation_level=None)
    planted = conn.execute(
        "SELECT 1 FROM message_fts WHERE message_fts MATCH ?", (f'"{OLD_PHRASE}"',)
    ).fetchone()
    if planted is None:
        ids = [
            int(r[0])
            for r in conn.execute("SELECT message_id FROM message_text WHERE role = 'user'")
        ]
        chosen = ids[:: max(1, len(ids) // 40)][:40]
        conn.execute("BEGIN")
        for number, message_id in enumerate(chosen):
            extra = f"the {OLD_PHRASE} garden" if number == 1 else f"a {RARE_WORD} garden"
            row = conn.execute(
                "SELECT session_id, seq, role, text FROM message_text WHERE message_id = ?",
                (message_id,),
            ).fetchone()
            # The real triggers: the delete unindexes the old words, the insert indexes.
            conn.execute("DELETE FROM message_text WHERE message_id = ?", (message_id,))
            conn.execute(
                "INSERT INTO message_text(message_id, session_id, seq, role, text)"
                " VALUES (?, ?, ?, ?, ?)",
                (message_id, row[0], row[1], row[2], f"{row[3]} {extra}"),
            )
        conn.execute("COMMIT")
    conn.close()
    return path


def notes_index(root: Path, count: int) -> Path:
    """A memory.db of `count` notes (the index's migrations and writes, in the sync's
    batches of BATCH_FILES notes a transaction, compacted as the sync's first build is;
    memory_bench's words), the oldest holding OLD_PHRASE in its body."""
    path = root / f"memory-{count}.db"
    if path.exists() and planted(path):
        return path
    path.unlink(missing_ok=True)  # built by an earlier version of this script
    print(f"building {count:,} notes into {path} ...", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    building = path.with_suffix(".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{building}{suffix}").unlink(missing_ok=True)
    SqliteDatabase.open_sync(building, INDEX_MIGRATIONS).close_sync()
    rng = random.Random(14)
    conn = sqlite3.connect(building, isolation_level=None)
    for first in range(0, count, BATCH_FILES):
        conn.execute("BEGIN")
        for number in range(first, min(count, first + BATCH_FILES)):
            body = " ".join(words(rng, rng.randint(20, 120)))
            if number == 0:
                body += f" by the {OLD_PHRASE}"
            tags = " ".join(rng.sample(COMMON, 2))
            index_words(conn, number + 1, " ".join(words(rng, 3)), tags, body)
        conn.execute("COMMIT")
    began, steps, longest = time.perf_counter(), 0, 0.0
    for table in FTS_TABLES:  # as the sync's first build ends: Index.compact
        pages = -MERGE_PAGES
        while True:
            step = time.perf_counter()
            merged = merge_step(conn, table, pages)
            steps, longest = steps + 1, max(longest, time.perf_counter() - step)
            if not merged:
                break
            pages = MERGE_PAGES
    print(
        f"  compacted in {time.perf_counter() - began:.1f} s, {steps} steps,"
        f" the longest {longest * 1000:.0f} ms",
        flush=True,
    )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    building.rename(path)
    Path(f"{building}-wal").unlink(missing_ok=True)
    Path(f"{building}-shm").unlink(missing_ok=True)
    return path


def planted(path: Path) -> bool:
    """Whether the memory.db at `path` is this script's: the title and tag tables of
    migration 2, and OLD_PHRASE in the oldest note."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("SELECT 1 FROM note_titles_fts LIMIT 1").fetchall()
        sql = "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?"
        return conn.execute(sql, (f'"{OLD_PHRASE}"',)).fetchall() == [(1,)]
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def column_filter_window(conn: sqlite3.Connection, query: str) -> list[tuple[int, float]]:
    """The window rule as it was before m27: the same scores, but a title or tag window
    was a column filter on notes_fts ("title : word"), which walks every note holding
    the word anywhere to find the newest holding it there (all of them when none do)."""
    match = fts_query(query)
    if not match:
        return []
    sql = "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
    inside = [int(r[0]) for r in conn.execute(sql, (match, OLD_WINDOW))]
    if not inside:
        return []
    oldest = inside[-1]
    scores = dict.fromkeys(inside, 0.0)
    for word in query_words(query):
        weights: dict[int, float] = {}
        for column, weight in COLUMN_WEIGHTS:
            if column == "body":
                sql = "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? AND rowid >= ?"
                bound = oldest
            else:
                sql = "SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?"
                sql += " ORDER BY rowid DESC LIMIT ?"
                bound = OLD_WINDOW
            for (rowid,) in conn.execute(sql, (f'{column} : "{word}"', bound)):
                if column == "body" and rowid not in scores:
                    continue
                weights[rowid] = weights.get(rowid, 0.0) + weight
        if weights:
            rarity = math.log(1.0 + len(inside) / len(weights))
            for rowid, weight in weights.items():
                scores[rowid] = scores.get(rowid, 0.0) + weight * rarity
    best = heapq.nsmallest(10, scores, key=lambda rowid: (-scores[rowid], -rowid))
    return [(rowid, scores[rowid]) for rowid in best]


Timings = dict[tuple[str, str, str], list[float]]  # (home, kind, ranking) -> ms
Ranking = Callable[[sqlite3.Connection, str], object]


def measure(
    conns: dict[str, sqlite3.Connection],
    queries: dict[str, list[str]],
    rankings: dict[str, Ranking],
    rounds: int,
    into: Timings,
    skip: frozenset[tuple[str, str]] = frozenset(),
) -> None:
    """Every ranking on every home but the (home, ranking) pairs in `skip`, alternating
    (a query by one ranking on every home in turn, then by the next ranking), `rounds`
    times over every query: the load of a shared machine falls on every home alike, so
    the ratios hold. Each timed search starts from caches another task has filled
    (`cold`), as a search in a busy process does: run after whatever came before it, a
    search paid for that work's size (after bm25 or the column filters on 1,000,000
    notes, 8 ms walking every note holding the word, a rare word's new ranking took
    1.86x its 10k figure, 1.37x run alone)."""
    for kind, texts in queries.items():
        for _ in range(rounds):
            for text in texts:
                for name, run in rankings.items():
                    for label, conn in conns.items():
                        if (label, name) in skip:
                            continue
                        cold()
                        began = time.perf_counter()
                        run(conn, text)
                        spent = (time.perf_counter() - began) * 1000
                        into.setdefault((label, kind, name), []).append(spent)
                        into.setdefault((label, f"query {text}", name), []).append(spent)


# Bigger than the machine's CPU caches (2 MB of L2 a core, 32 MB of L3 here).
SCRATCH = np.ones(48 * 1024 * 1024 // 8, dtype=np.uint64)


def cold() -> None:
    """Fill the CPU caches with other data (read through 48 MB): every timed search
    starts alike, whatever the one before it read."""
    SCRATCH.sum()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def ratios(homes: list[str], p50: Sequence[float | None]) -> str:
    """Each bigger home's p50 over the smallest's (None: not run there)."""
    first = p50[0]
    return ", ".join(
        f"{home}/{homes[0]} x{value / first:.2f}"
        for home, value in zip(homes[1:], p50[1:], strict=True)
        if value is not None and first
    )


def report(
    title: str, homes: list[str], kinds: list[str], rankings: list[str], timings: Timings
) -> None:
    """One line per query kind and ranking: p50/p95 on each home side by side, and the
    ratio of each bigger home's p50 to the smallest's."""
    print(title)
    for kind in kinds:
        for name in rankings:
            cells = []
            p50: list[float | None] = []
            for home in homes:
                values = timings.get((home, kind, name))
                if not values:  # not run on this home
                    p50.append(None)
                    cells.append(f"{home} -")
                    continue
                p50.append(statistics.median(values))
                cells.append(f"{home} {p50[-1]:.2f}/{percentile(values, 0.95):.2f}")
            print(
                f"  {kind:<13} {name:<4} p50/p95 ms: "
                + " | ".join(cells)
                + f" | p50 {ratios(homes, p50)}"
            )


def report_queries(
    homes: list[str], queries: dict[str, list[str]], name: str, timings: Timings
) -> None:
    """Each query's p50 of ranking `name` on every home: a kind's p50 above mixes its
    queries."""
    for kind, texts in queries.items():
        for text in texts:
            p50 = [statistics.median(timings[(home, f"query {text}", name)]) for home in homes]
            cells = " | ".join(
                f"{home} {value:.2f}" for home, value in zip(homes, p50, strict=True)
            )
            print(f"    {kind:<13} {text!r:<26} {name} p50 ms: {cells} | {ratios(homes, p50)}")


def sessions(small_root: Path, big_root: Path, big_messages: int, rounds: int) -> None:
    homes = {"10k": session_home(small_root, 10_000), "1M": session_home(big_root, big_messages)}
    timings: Timings = {}

    def old(conn: sqlite3.Connection, text: str) -> object:
        match = old_fts_query(text)
        return conn.execute(OLD_SESSIONS, (match, SEARCH_WINDOW, 20, match)).fetchall()

    def new(conn: sqlite3.Connection, text: str) -> object:
        return search_messages(conn, text)

    conns = {
        label: sqlite3.connect(f"file:{path}?mode=ro", uri=True) for label, path in homes.items()
    }
    for label, conn in conns.items():
        for text in [t for texts in SESSION_QUERIES.values() for t in texts]:
            hits = search_messages(conn, text)
            first = f", first: {hits[0].snippet}" if hits else ""
            print(f"  {label} {text}: {len(hits)} hits{first}")
    measure(conns, SESSION_QUERIES, {"old": old, "new": new}, rounds, timings)
    for conn in conns.values():
        conn.close()
    report(
        f"session search, 10,000 vs {big_messages:,} messages"
        " (old: bm25 + snippet(); new: the window rule)",
        list(homes),
        list(SESSION_QUERIES),
        ["old", "new"],
        timings,
    )
    report_queries(list(homes), SESSION_QUERIES, "new", timings)


def label(count: int) -> str:
    """10k, 100k, 1M."""
    return f"{count // 1_000_000}M" if count >= 1_000_000 else f"{count // 1_000}k"


def memory(root: Path, counts: list[int], rounds: int) -> None:
    timings: Timings = {}

    def old(conn: sqlite3.Connection, text: str) -> object:
        match = " OR ".join(f'"{w}"' for w in text.replace('"', " ").split())
        return conn.execute(OLD_MEMORY, (match, 10)).fetchall()

    def new(conn: sqlite3.Connection, text: str) -> object:
        return rank_window(conn, text, limit=10)

    def w200(conn: sqlite3.Connection, text: str) -> object:
        return rank_window(conn, text, limit=10, window=OLD_WINDOW)

    rankings: dict[str, Ranking] = {
        "old": old,
        "cols": column_filter_window,
        "w200": w200,
        "new": new,
    }
    conns = {label(count): sqlite3.connect(notes_index(root, count)) for count in counts}
    for home, conn in conns.items():
        ranked = [rowid for rowid, _ in rank_window(conn, f'"{OLD_PHRASE}"', limit=10)]
        place = f"found, rank {ranked.index(1) + 1}" if 1 in ranked else "NOT FOUND"
        print(f'  {home} "{OLD_PHRASE}" (the oldest note): {place}')
    # bm25 over every match takes seconds a query on a million notes: up to 100,000.
    skip = frozenset((label(count), "old") for count in counts if count > 100_000)
    measure(conns, MEMORY_QUERIES, rankings, rounds, timings, skip)
    for conn in conns.values():
        conn.close()
    report(
        "memory search ranking, " + " vs ".join(f"{count:,}" for count in counts) + " notes"
        " (old: bm25 over every match; cols: the window, title and tag windows as column"
        " filters on notes_fts, before m27; w200: the window of 200 notes, before memsearch;"
        f" new: the window as it is, {MEMORY_WINDOW} notes)",
        list(conns),
        list(MEMORY_QUERIES),
        list(rankings),
        timings,
    )
    for name in ("w200", "new"):
        report_queries(list(conns), MEMORY_QUERIES, name, timings)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=Path, default=Path("/tmp/habakkuk-search/small"))
    parser.add_argument("--big", type=Path, default=Path("/tmp/habakkuk-search/big"))
    parser.add_argument("--big-messages", type=int, default=1_000_000)
    parser.add_argument("--notes", type=Path, default=Path("/tmp/habakkuk-search/notes"))
    parser.add_argument("--big-notes", type=int, default=100_000)
    parser.add_argument("--huge-notes", type=int, default=1_000_000, help="0: skip")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--memory-only", action="store_true", help="skip the sessions")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if not args.memory_only:
        sessions(args.small, args.big, args.big_messages, args.rounds)
    counts = [10_000, args.big_notes] + ([args.huge_notes] if args.huge_notes else [])
    memory(args.notes, counts, args.rounds)


if __name__ == "__main__":
    main()
