"""Build a big home: N sessions and M messages in transcripts.db (defaults 100,000 and
1,000,000), with the rows a home that has seen that much work holds around them.

The databases are opened through the stores' own migrations (so the schema, the search
triggers and the indexes are exactly the real ones) and filled with executemany in big
transactions. Shapes follow what real use writes:

- three agents (main, ops, research); sessions from the CLI, the web chat (a web.db
  conversation with its message log), Telegram (a control.db channel binding) and the
  /v1 API;
- turns of a user message and an assistant reply, some with tool calls whose results
  follow in the next user message; a compaction on some long sessions;
- one usage.db row per model call; a done turn job per turn of the last 13 days
  (all of it inside the default retention windows, so opening the home prunes nothing);
- the redelivery keys (control.db channel_seen) of the web and Telegram messages of the
  last 7 days, the week a channel keeps them.

Every tool call has its result, so the transcripts need no repair.

Usage: python benchmarks/big_home.py HOME [--sessions N] [--messages M] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import mock_config

from habakkuk.engine.llm.types import (
    Block,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_to_json,
)

if TYPE_CHECKING:
    from habakkuk.engine.store import Migration

CONFIG = mock_config("main", "ops", "research", model="mock/bench", mode="read-only")

AGENTS = ("main", "main", "main", "ops", "research")
ORIGINS = ("cli", "channel:web", "channel:web", "channel:telegram", "api")
WORDS = [
    "deploy",
    "backup",
    "invoice",
    "calendar",
    "garden",
    "recipe",
    "budget",
    "server",
    "python",
    "letter",
    "meeting",
    "travel",
    "weather",
    "report",
    "review",
    "schedule",
    "migrate",
    "database",
    "kitchen",
    "bicycle",
    "holiday",
    "library",
    "contract",
    "podcast",
    "museum",
    "tomato",
    "printer",
    "network",
    "battery",
    "mortgage",
    "violin",
]
TOOLS = (
    ("read_file", {"path": "notes/todo.md"}),
    ("search_files", {"pattern": "TODO", "path": "."}),
    ("web_fetch", {"url": "https://example.org/page"}),
    ("shell", {"command": "ls -la"}),
)
# Everything lies inside the default retention windows (web.db 180 days, sessions 365,
# finished jobs 14), so opening the home prunes nothing: the home stays big.
HISTORY_SECONDS = 170 * 86400
JOBS_SECONDS = 13 * 86400
SEEN_SECONDS = 7 * 86400  # channels/store.py SEEN_KEEP_SECONDS
BATCH = 20_000  # rows per executemany; one transaction per store per batch of sessions
SESSIONS_PER_COMMIT = 5_000


def _json(block: Block) -> dict[str, object]:
    """A block as the stores write it (the real block types, the real encoding)."""
    return block_to_json(block)


def _blocks(blocks: list[dict[str, object]]) -> str:
    return json.dumps(blocks, separators=(",", ":"), ensure_ascii=False)


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """`total` messages (rounded down to even) over `parts` sessions: two each, the rest
    in pairs to sessions drawn by a heavy-tailed weight (a few long ones, many short)."""
    counts = [2] * parts
    weights = [rng.paretovariate(1.2) for _ in range(parts)]
    for index in rng.choices(range(parts), weights, k=max(0, total // 2 - parts)):
        counts[index] += 2
    return counts


class Rows:
    """The rows of one batch of sessions, per table."""

    def __init__(self) -> None:
        self.sessions: list[tuple[object, ...]] = []
        self.messages: list[tuple[object, ...]] = []
        self.compactions: list[tuple[object, ...]] = []
        self.jobs: list[tuple[object, ...]] = []
        self.calls: list[tuple[object, ...]] = []
        self.conversations: list[tuple[object, ...]] = []
        self.events: list[tuple[object, ...]] = []
        self.bindings: list[tuple[object, ...]] = []
        self.settings: list[tuple[object, ...]] = []
        self.seen: list[tuple[object, ...]] = []


def _session_rows(rows: Rows, number: int, count: int, rng: random.Random, now: float) -> None:
    """One session of `count` messages (an even number: turns of user then assistant)."""
    session = f"ses_{number:016x}"
    agent = rng.choice(AGENTS)
    origin = rng.choice(ORIGINS)
    started = now - rng.uniform(3600, HISTORY_SECONDS)
    # Turns spread over the time from the start to now, so nothing lies in the future.
    gap = (now - started) / (count // 2 + 1)
    at = started
    seq = 0
    title = ""
    turn_number = 0
    turn_starts: list[int] = []
    conversation = f"web-{number}" if origin == "channel:web" else ""
    while seq < count:
        turn = f"turn_{number:08x}{turn_number:06x}"
        turn_number += 1
        turn_starts.append(seq)
        text = _sentence(rng, rng.randint(4, 30))
        title = title or text[:80]
        rows.messages.append(
            (session, seq, "user", "", _blocks([_json(TextBlock(text))]), turn, at)
        )
        if conversation:
            rows.events.append((conversation, "user", text, turn, session, agent, None, at))
        if at >= now - SEEN_SECONDS and origin in ("channel:web", "channel:telegram"):
            # The key a channel gateway marks seen: "<chat>:<message id>" per account.
            key = f"{conversation}:{turn}" if conversation else f"{100000 + number}:{seq}"
            rows.seen.append(("web" if conversation else "telegram", key, at))
        seq += 1
        # A tool round needs four messages: call, result, then the closing reply.
        if seq + 3 <= count and rng.random() < 0.25:
            name, arguments = rng.choice(TOOLS)
            call = f"call_{number:x}_{seq}"
            use = _json(ToolUseBlock(call, name, arguments))
            lead = _json(TextBlock("Let me check."))
            rows.messages.append(
                (session, seq, "assistant", "mock/bench", _blocks([lead, use]), turn, at + 0.5)
            )
            result = _json(ToolResultBlock(call, _sentence(rng, 40)))
            rows.messages.append((session, seq + 1, "user", "", _blocks([result]), turn, at + 1))
            rows.calls.append((at + 0.5, "mock", "bench", agent, session, "turn", 900, 40))
            seq += 2
        reply = _sentence(rng, rng.randint(10, 60))
        rows.messages.append(
            (
                session,
                seq,
                "assistant",
                "mock/bench",
                _blocks([_json(TextBlock(reply))]),
                turn,
                at + 2,
            )
        )
        if conversation:
            rows.events.append(
                (conversation, "assistant", reply, turn, session, agent, None, at + 2)
            )
        rows.calls.append((at + 2, "mock", "bench", agent, session, "turn", 1200, 80))
        if at >= now - JOBS_SECONDS:  # retention has deleted older finished jobs
            payload = json.dumps({"session": session, "text": text, "attended": True})
            rows.jobs.append(
                (turn, "turn", session, payload, "done", 1, 5, at, '{"status":"done"}', at, at + 2)
            )
        seq += 1
        at += rng.uniform(0.5, 1.0) * gap
    if count >= 20 and rng.random() < 0.5:
        # The summary folds the older half; the kept part starts at a turn's user message.
        kept = turn_starts[len(turn_starts) // 2]
        summary = "The user and the agent talked about " + _sentence(rng, 12)
        rows.compactions.append((session, summary, kept, count, at))
    rows.sessions.append((session, agent, title, "You are a helpful agent.", origin, started, at))
    if conversation:
        rows.conversations.append((conversation, agent, session, started, at))
    elif origin == "channel:telegram":
        rows.bindings.append((f"telegram:bot:{100000 + number}", session, "", at))
    if rng.random() < 0.05:
        rows.settings.append((session, "effort", "high", at))


def _open(path: Path, migrations: Sequence[Migration]) -> sqlite3.Connection:
    """The store's own schema (its migrations), then a plain connection for bulk writes."""
    from habakkuk.engine.store import SqliteDatabase

    db = SqliteDatabase.open_sync(path, migrations)
    db.close_sync()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _many(conn: sqlite3.Connection, sql: str, rows: list[tuple[object, ...]]) -> None:
    for start in range(0, len(rows), BATCH):
        conn.executemany(sql, rows[start : start + BATCH])


def build(root: Path, sessions: int, messages: int, seed: int = 18) -> dict[str, int]:
    """Fill the home at `root` (created when missing); returns the row counts written."""
    from habakkuk.channels.store import SCHEMA as CHANNEL_SCHEMA
    from habakkuk.engine.home import Home
    from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
    from habakkuk.engine.llm.usage import MIGRATIONS as USAGE_MIGRATIONS
    from habakkuk.engine.sessions import MIGRATIONS as TRANSCRIPT_MIGRATIONS
    from habakkuk.engine.state import MIGRATIONS as STATE_MIGRATIONS
    from habakkuk.server.webstore import MIGRATIONS as WEB_MIGRATIONS

    home = Home(root)
    home.prepare()
    if not home.config_path.exists():
        home.config_path.write_text(CONFIG, encoding="utf-8")
    rng = random.Random(seed)
    counts = _split(messages, sessions, rng)
    control = _open(home.db_path("control"), JOB_MIGRATIONS)
    control.executescript(CHANNEL_SCHEMA)
    transcripts = _open(home.db_path("transcripts"), TRANSCRIPT_MIGRATIONS)
    usage = _open(home.db_path("usage"), USAGE_MIGRATIONS)
    web = _open(home.db_path("web"), WEB_MIGRATIONS)
    state = _open(home.db_path("state"), STATE_MIGRATIONS)
    totals = dict.fromkeys(("sessions", "messages", "compactions", "jobs", "calls"), 0)
    totals.update(conversations=0, events=0, bindings=0, seen=0)
    now = time.time()
    for start in range(0, sessions, SESSIONS_PER_COMMIT):
        rows = Rows()
        for number in range(start, min(sessions, start + SESSIONS_PER_COMMIT)):
            _session_rows(rows, number, counts[number], rng, now)
        _write(transcripts, control, usage, web, state, rows)
        for name in totals:
            totals[name] += len(getattr(rows, name))
    for conn in (control, transcripts, usage, web, state):
        conn.execute("PRAGMA optimize")
        conn.close()
    return totals


def _write(
    transcripts: sqlite3.Connection,
    control: sqlite3.Connection,
    usage: sqlite3.Connection,
    web: sqlite3.Connection,
    state: sqlite3.Connection,
    rows: Rows,
) -> None:
    with _transaction(transcripts):
        _many(
            transcripts,
            "INSERT INTO sessions(id, agent, title, system_prompt, origin, created_at,"
            " updated_at, title_source) VALUES (?, ?, ?, ?, ?, ?, ?, 'first_message')",
            rows.sessions,
        )
        # The real triggers fill message_text and the full-text index.
        _many(
            transcripts,
            "INSERT INTO messages(session_id, seq, role, model, blocks, turn_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows.messages,
        )
        _many(
            transcripts,
            "INSERT INTO compactions(session_id, summary, first_kept_seq, transcript_len,"
            " created_at) VALUES (?, ?, ?, ?, ?)",
            rows.compactions,
        )
    with _transaction(control):
        _many(
            control,
            "INSERT INTO jobs(id, kind, serial_key, payload, status, attempts, max_attempts,"
            " run_after, result, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows.jobs,
        )
        _many(
            control,
            "INSERT INTO channel_bindings(conversation, session, agent_override, last_active)"
            " VALUES (?, ?, ?, ?)",
            rows.bindings,
        )
        _many(
            control,
            "INSERT OR IGNORE INTO channel_seen(account, key, at) VALUES (?, ?, ?)",
            rows.seen,
        )
    with _transaction(usage):
        _many(
            usage,
            "INSERT INTO calls(at, provider, model, agent, session, purpose, input_tokens,"
            " output_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows.calls,
        )
    with _transaction(web):
        _many(
            web,
            "INSERT INTO conversations(conversation, agent, session, created_at, last_at)"
            " VALUES (?, ?, ?, ?, ?)",
            rows.conversations,
        )
        _many(
            web,
            "INSERT INTO events(conversation, role, text, turn, session, agent, dedupe, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows.events,
        )
    with _transaction(state):
        _many(
            state,
            "INSERT INTO session_settings(session, name, value, updated_at) VALUES (?, ?, ?, ?)",
            rows.settings,
        )


class _transaction:
    """BEGIN ... COMMIT on a connection in autocommit mode (ROLLBACK on error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN")

    def __exit__(self, kind: object, *_: object) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")


def _iter_counts(totals: dict[str, int]) -> Iterator[str]:
    for name, value in totals.items():
        yield f"{value:,} {name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    if args.messages < 2 * args.sessions:
        sys.exit("big_home: --messages must be at least twice --sessions (a turn is two)")
    if (args.home / "transcripts.db").exists():
        sys.exit(f"big_home: {args.home} already has a transcripts.db; pick an empty folder")
    started = time.perf_counter()
    totals = build(args.home, args.sessions, args.messages, args.seed)
    elapsed = time.perf_counter() - started
    print(f"big home {args.home}: " + ", ".join(_iter_counts(totals)) + f" in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
