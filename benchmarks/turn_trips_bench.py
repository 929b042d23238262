"""Turn trips: the database thread hops and transactions one turn needs, counted.

Runs N turns (one per session, no tool calls) with the mock provider through the
real path (as turns_bench.py does) and counts, per turn, every call of
Database.run / run_sync on every database of the runtime (control.db,
transcripts.db, state.db, usage.db; `write` is `run` with BEGIN IMMEDIATE ...
COMMIT around it) and every transaction (a BEGIN reaching SQLite). Prints the
path of one turn (each hop, its database and its caller, in order) and the
totals per turn.

The counting wraps the Database methods here, in the benchmark: the product has
no counting code.

Usage: python benchmarks/turn_trips_bench.py [N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from _harness import turns_config

from habakkuk.engine import store
from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventPayload, JobFinished
from habakkuk.engine.home import Home
from habakkuk.engine.store import Database
from habakkuk.runtime import Runtime

T = TypeVar("T")


WRITES = {"INSERT", "UPDATE", "DELETE", "REPLACE"}
SKIPPED = {Path(store.__file__).resolve(), Path(__file__).resolve()}
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Hop:
    """One call that crossed to a database thread."""

    database: str
    caller: str
    transactions: int = 0
    empty: bool = False  # a claim that found nothing: a pool polling, not a turn's trip


@dataclass
class Trips:
    """Every hop recorded while `recording` is on, in order."""

    hops: list[Hop] = field(default_factory=list)
    recording: bool = False


def _where(frame: FrameType) -> str:
    path = Path(frame.f_code.co_filename).resolve()
    try:
        name = str(path.relative_to(ROOT / "habakkuk"))
    except ValueError:
        name = path.name
    return f"{name}:{frame.f_code.co_name}"


def _caller() -> str:
    """The first two frames outside store.py and this file: who asked for the hop, and
    who asked them (an awaiting coroutine's frame is its awaiter's f_back)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and Path(frame.f_code.co_filename).resolve() in SKIPPED:
        frame = frame.f_back
    if frame is None:
        return "?"
    outer = frame.f_back
    if outer is None or not Path(outer.f_code.co_filename).resolve().is_relative_to(ROOT):
        return _where(frame)  # run in a task of its own: asyncio's frames say nothing
    return f"{_where(frame)} < {_where(outer)}"


@contextmanager
def counting(trips: Trips) -> Iterator[None]:
    """Wrap Database.run / run_sync / write: each is one hop. A `run` hop notes the
    BEGINs its function sent SQLite; a `write` hop is one transaction (the database
    thread opens it, and may share it with other writes waiting at that moment)."""
    original_run = Database.run
    original_run_sync = Database.run_sync
    original_write = Database.write
    original_write_now = Database.write_now
    original_write_if_free = Database.write_if_free

    def counted(db: Database, fn: Callable[[sqlite3.Connection], T]) -> Callable[..., T]:
        if not trips.recording:
            return fn
        hop = Hop(Path(db.path).name, _caller())
        trips.hops.append(hop)

        def traced(conn: sqlite3.Connection) -> T:
            explicit = False

            def trace(sql: str) -> None:
                # A BEGIN opens a transaction; so does a write sent outside one (autocommit).
                # Statements of triggers arrive as "-- TRIGGER ..." and are not counted.
                nonlocal explicit
                word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
                if word == "BEGIN":
                    explicit = True
                    hop.transactions += 1
                elif word in ("COMMIT", "ROLLBACK", "END"):
                    explicit = False
                elif word in WRITES and not explicit:
                    hop.transactions += 1

            conn.set_trace_callback(trace)
            try:
                result = fn(conn)
            finally:
                conn.set_trace_callback(None)
            hop.empty = result == ([], []) and "jobs.py:settle_and_claim" in hop.caller
            return result

        return traced

    async def run(self: Database, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await original_run(self, counted(self, fn))

    def run_sync(self: Database, fn: Callable[[sqlite3.Connection], T]) -> T:
        return original_run_sync(self, counted(self, fn))

    async def write(
        self: Database, fn: Callable[[sqlite3.Connection], T], *, inline: bool = False
    ) -> T:
        if not trips.recording:
            return await original_write(self, fn, inline=inline)
        hop = Hop(Path(self.path).name, _caller(), transactions=1)
        trips.hops.append(hop)
        result = await original_write(self, fn, inline=inline)
        hop.empty = result == ([], []) and "jobs.py:settle_and_claim" in hop.caller
        return result

    def write_now(
        self: Database, fn: Callable[[sqlite3.Connection], T], *, inline: bool = False
    ) -> asyncio.Future[T]:
        if trips.recording:  # the queue's enqueues of one pass: one transaction
            trips.hops.append(Hop(Path(self.path).name, _caller(), transactions=1))
        return original_write_now(self, fn, inline=inline)

    def write_if_free(
        self: Database, fn: Callable[[sqlite3.Connection], T]
    ) -> tuple[bool, Any] | None:
        outcome = original_write_if_free(self, fn)
        if trips.recording and outcome is not None:  # an enqueue written inline at once
            trips.hops.append(Hop(Path(self.path).name, _caller(), transactions=1))
        return outcome

    Database.run = run  # type: ignore[method-assign]  # counts the trips
    Database.run_sync = run_sync  # type: ignore[method-assign]  # counts the trips
    Database.write = write  # type: ignore[method-assign]  # counts the trips
    Database.write_now = write_now  # type: ignore[method-assign]  # counts the trips
    Database.write_if_free = write_if_free  # type: ignore[method-assign]  # counts the trips
    try:
        yield
    finally:
        Database.run = original_run  # type: ignore[method-assign]  # put back
        Database.run_sync = original_run_sync  # type: ignore[method-assign]  # put back
        Database.write = original_write  # type: ignore[method-assign]  # put back
        Database.write_now = original_write_now  # type: ignore[method-assign]  # put back
        Database.write_if_free = original_write_if_free  # type: ignore[method-assign]  # put back


def _status(event: EventPayload) -> str:
    assert isinstance(event, JobFinished)
    return event.status


async def _turns(runtime: Runtime, trips: Trips, count: int) -> tuple[list[Hop], list[str], float]:
    """Submit and run `count` turns (one per new session) on running workers: the hops
    from the first submit to the last turn's end, and the turns' statuses."""
    sessions = [await runtime.sessions.new_session() for _ in range(count)]
    with runtime.bus.subscribe(
        lambda e: isinstance(e, JobFinished), maxsize=count + 10
    ) as finished:
        trips.hops.clear()
        trips.recording = True
        started = time.perf_counter()
        for session in sessions:
            await runtime.turns.submit(session.id, "hello")
        statuses = [_status(await finished.get()) for _ in range(count)]
        elapsed = time.perf_counter() - started
        trips.recording = False
    return list(trips.hops), statuses, elapsed


def _per_turn(hops: list[Hop]) -> list[Hop]:
    """The hops that are the turns' own: without the pools' empty polls."""
    return [h for h in hops if not h.empty]


async def bench(count: int, concurrency: int) -> None:
    trips = Trips()
    with counting(trips), tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp))
        text = turns_config(concurrency)
        runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
        try:
            runtime.start_workers()
            await asyncio.sleep(1.0)  # past the pools' first claims and sweeps
            one, statuses, _ = await _turns(runtime, trips, 1)
            print("one turn, from submit to its end, hop by hop (database, transactions, caller):")
            for n, hop in enumerate(one, 1):
                note = "  (empty claim: a pool polling)" if hop.empty else ""
                print(f"  {n:2}. {hop.database:<15} {hop.transactions} tx  {hop.caller}{note}")
            own = _per_turn(one)
            print(
                f"  = {len(own)} hops, {sum(h.transactions for h in own)} transactions"
                f" ({statuses[0]}; {len(one) - len(own)} empty claims left out)"
            )
            many, statuses, elapsed = await _turns(runtime, trips, count)
        finally:
            await runtime.close()
    failed = sum(1 for status in statuses if status != "done")
    own = _per_turn(many)
    print(
        f"{count} turns ({concurrency} concurrent, {failed} not done, {count / elapsed:,.0f}"
        f" turns/s while counting): {len(own) / count:.2f} hops and"
        f" {sum(h.transactions for h in own) / count:.2f} transactions per turn"
        f" (+{(len(many) - len(own)) / count:.2f} empty claims)"
    )
    per_db = Counter(h.database for h in own)
    print(
        "  per database, per turn: "
        + ", ".join(f"{name} {n / count:.2f}" for name, n in sorted(per_db.items()))
    )
    print("  per caller, per turn:")
    for caller, n in Counter(h.caller for h in own).most_common():
        print(f"    {n / count:5.2f}  {caller}")


def main(argv: list[str] | None = None) -> Any:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    asyncio.run(bench(args.count, args.concurrency))


if __name__ == "__main__":
    main()
