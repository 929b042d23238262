"""What every webhook-ingest benchmark shares: a runtime with one channel account behind its
HTTP server (channels up, no turn workers, so turns stay queued and are counted), requests
POSTed CONCURRENCY at a time, and the two figures each platform prints: genuine requests
into queued turns per second, forged ones refused per second (starting no turn)."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from benchmarks._harness import fresh_home, mock_config

CONCURRENCY = 32
# One prepared request: POST it, get (status, body). Built before the clock starts, so the
# figures are the server's work: the check, the parse and the durable turn.
Post = Callable[[], Awaitable[tuple[int, str]]]


def turns(db: Path) -> int:
    """The turns queued in control.db."""
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'turn'").fetchone()[0])


async def post_all(posts: list[Post]) -> int:
    """Run every POST, CONCURRENCY at a time; the number answered 200."""
    queue = list(posts)
    ok = 0

    async def worker() -> None:
        nonlocal ok
        while queue:
            status, _ = await queue.pop()()
            ok += status == 200

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return ok


def channel_body(yaml: str) -> str:
    """A driver's `channels.<account>` YAML indented under its account, letting anyone in
    (each request comes from another sender)."""
    lines = [line for line in yaml.splitlines() if not line.startswith("allow_from")]
    return "".join(f"    {line}\n" for line in [*lines, "allow_from: '*'"])


@asynccontextmanager
async def serving(channel: str, env: dict[str, str], account: str) -> AsyncIterator[Any]:
    """A runtime with `channel` (the YAML body of channels.<account>, indented) up behind its
    HTTP server; yields the server's URL, the control.db path and the channel supervisor
    (the caller points its fake at `<url>/channels/<account>`, then waits for the adapter)."""
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    with tempfile.TemporaryDirectory() as root:
        text = "http: {}\nchannels:\n  " + account + ":\n" + channel
        home = fresh_home(root, mock_config(mode="full", extra=text))
        (Path(root) / ".env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
        config = parse_config(home.config_path.read_text(), home.config_path, home)
        runtime = await Runtime.open(home, config)
        try:
            channels = runtime.channel_service()
            channels.start()  # the gateway and adapters, no turn workers
            await channels.started()
            server = await runtime.http.start("127.0.0.1:0")
            yield server.url, home.db_path("control"), channels.supervisor
        finally:
            await runtime.close()


async def measure(
    name: str, genuine: list[Post], forged: list[Post], db: Path, *, what: str = "signed requests"
) -> None:
    """Time the genuine requests into turns and the forged ones refused; print both."""
    started = time.perf_counter()
    ok = await post_all(genuine)
    took = time.perf_counter() - started
    queued = turns(db)
    assert ok == len(genuine) == queued, (ok, len(genuine), queued)
    print(f"{name} {what} into queued turns: {len(genuine) / took:,.0f}/s "
          f"({len(genuine)} in {took:.2f}s, {CONCURRENCY} at a time)")  # fmt: skip
    started = time.perf_counter()
    ok = await post_all(forged)
    took = time.perf_counter() - started
    assert ok == 0 and turns(db) == queued
    print(f"{name} forged {what.split()[-1]} refused (403, no turn): "
          f"{len(forged) / took:,.0f}/s")  # fmt: skip
