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

Memory: the ranking query of memory search on a memory.db of 10,000 and of 100,000 notes
(memory_bench.py's words: a few common, many rare), built through the index's own
migrations; the snippets and note rows read after ranking are per hit, the same at any
size (memory_bench.py times the whole service at 10,000 notes).

Prints p50/p95 in ms per query kind, old beside new, and the ratio big/small of the p50s.
Run: python benchmarks/search_bench.py [--small DIR] [--big DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from _harness import OLD_SESSIONS
from big_home import build
from memory_bench import COMMON, RARE, words

from habakkuk.engine.session_search import SEARCH_WINDOW, search_messages
from habakkuk.engine.store import Database
from habakkuk.knowledge.index import INDEX_MIGRATIONS, rank_window

# Memory search before issue 27: bm25 over every matching note.
OLD_MEMORY = (
    "SELECT notes_fts.rowid, bm25(notes_fts, 10.0, 5.0, 1.0) AS score FROM notes_fts"
    " WHERE notes_fts MATCH ? ORDER BY score LIMIT ?"
)
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
    # 684 and 103 matches in 10k notes, 7,060 and 958 in 100k (the window holds 200).
    "rare": [RARE[100], RARE[-1]],
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
    """A memory.db of `count` notes (the index's migrations; memory_bench's words)."""
    path = root / f"memory-{count}.db"
    if path.exists():
        return path
    root.mkdir(parents=True, exist_ok=True)
    Database.open_sync(path, INDEX_MIGRATIONS).close_sync()
    rng = random.Random(14)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for number in range(count):
        conn.execute(
            "INSERT INTO notes_fts(rowid, title, tags, body) VALUES (?, ?, ?, ?)",
            (
                number + 1,
                " ".join(words(rng, 3)),
                " ".join(rng.sample(COMMON, 2)),
                " ".join(words(rng, rng.randint(20, 120))),
            ),
        )
    conn.execute("COMMIT")
    conn.close()
    return path


Timings = dict[tuple[str, str, str], list[float]]  # (home, kind, old|new) -> ms


def measure(
    conns: dict[str, sqlite3.Connection],
    queries: dict[str, list[str]],
    old: Callable[[sqlite3.Connection, str], object],
    new: Callable[[sqlite3.Connection, str], object],
    rounds: int,
    into: Timings,
) -> None:
    """Old and new on the small and the big home, alternating (old, new on one home, then
    on the other, query by query), `rounds` times over every query: the load of a shared
    machine falls on both homes alike, so the ratios hold."""
    for kind, texts in queries.items():
        for _ in range(rounds):
            for text in texts:
                for label, conn in conns.items():
                    for name, run in (("old", old), ("new", new)):
                        began = time.perf_counter()
                        run(conn, text)
                        spent = (time.perf_counter() - began) * 1000
                        into.setdefault((label, kind, name), []).append(spent)
                        into.setdefault((label, f"query {text}", name), []).append(spent)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def report(title: str, small: str, big: str, kinds: list[str], timings: Timings) -> None:
    print(title)
    for kind in kinds:
        cells = []
        p50: dict[tuple[str, str], float] = {}
        for home in (small, big):
            for name in ("old", "new"):
                values = timings[(home, kind, name)]
                p50[(home, name)] = statistics.median(values)
                cells.append(
                    f"{home} {name} {p50[(home, name)]:.2f}/{percentile(values, 0.95):.2f}"
                )
        ratios = ", ".join(
            f"{name} x{p50[(big, name)] / p50[(small, name)]:.1f}" for name in ("old", "new")
        )
        print(f"  {kind:<13} p50/p95 ms: " + " | ".join(cells) + f" | big/small p50: {ratios}")


def report_queries(small: str, big: str, queries: dict[str, list[str]], timings: Timings) -> None:
    """Each query's new p50 on both homes: a kind's p50 above mixes its queries."""
    for kind, texts in queries.items():
        for text in texts:
            key = f"query {text}"
            low = statistics.median(timings[(small, key, "new")])
            high = statistics.median(timings[(big, key, "new")])
            print(
                f"    {kind:<13} {text!r:<26} new p50 ms: {small} {low:.2f} | {big} {high:.2f}"
                f" | x{high / low:.1f}"
            )


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
    measure(conns, SESSION_QUERIES, old, new, rounds, timings)
    for conn in conns.values():
        conn.close()
    report(
        f"session search, 10,000 vs {big_messages:,} messages"
        " (old: bm25 + snippet(); new: the window rule)",
        "10k",
        "1M",
        list(SESSION_QUERIES),
        timings,
    )
    report_queries("10k", "1M", SESSION_QUERIES, timings)


def memory(root: Path, small: int, big: int, rounds: int) -> None:
    timings: Timings = {}

    def old(conn: sqlite3.Connection, text: str) -> object:
        match = " OR ".join(f'"{w}"' for w in text.split())
        return conn.execute(OLD_MEMORY, (match, 10)).fetchall()

    def new(conn: sqlite3.Connection, text: str) -> object:
        return rank_window(conn, text, limit=10)

    labels = {"10k": small, "100k": big}
    conns = {label: sqlite3.connect(notes_index(root, count)) for label, count in labels.items()}
    measure(conns, MEMORY_QUERIES, old, new, rounds, timings)
    for conn in conns.values():
        conn.close()
    report(
        f"memory search ranking, {small:,} vs {big:,} notes"
        " (old: bm25 over every match; new: the window rule)",
        "10k",
        "100k",
        list(MEMORY_QUERIES),
        timings,
    )
    report_queries("10k", "100k", MEMORY_QUERIES, timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=Path, default=Path("/tmp/habakkuk-search/small"))
    parser.add_argument("--big", type=Path, default=Path("/tmp/habakkuk-search/big"))
    parser.add_argument("--big-messages", type=int, default=1_000_000)
    parser.add_argument("--notes", type=Path, default=Path("/tmp/habakkuk-search/notes"))
    parser.add_argument("--big-notes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    sessions(args.small, args.big, args.big_messages, args.rounds)
    memory(args.notes, 10_000, args.big_notes, args.rounds)


if __name__ == "__main__":
    main()
