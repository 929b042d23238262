"""Logging cost per turn (issue 34 "Benchmarks": target <= 0.2 ms a turn).

Three figures:

1. Real turns: a home on the offline mock provider runs TURNS turns through the queue
   and workers; every record they log reaches habakkuk.log's handler (JSON formatter,
   redactor, O_APPEND write, the rotation check), whose time is summed. Printed: records
   a turn and handler time a turn.
2. A busy turn, synthetic: the records a turn with tool calls and a provider retry logs
   at INFO (turn start and end, three tool calls, a retried model call with its error
   body, an HTTP access line): ten records through the same handler, per turn.
3. The redactor alone on what the stores write: a short log message, a provider's error
   body, a 10 KB tool result, a turn's message blocks.

Prints figures only. Run: python benchmarks/logging_bench.py [TURNS]
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from habakkuk.engine.logfile import RotatingJsonHandler, log_path
from habakkuk.engine.redact import REDACTOR, redact_blocks

BUSY_TURN = [
    (
        logging.INFO,
        "habakkuk.turns",
        "turn %s started in session %s (agent %s)",
        ("t_1", "s_1", "main"),
    ),
    (logging.INFO, "habakkuk.tools", "tool %s took %.2fs", ("exec", 0.12)),
    (logging.INFO, "habakkuk.tools", "tool %s took %.2fs", ("read_file", 0.01)),
    (logging.INFO, "habakkuk.tools", "tool %s took %.2fs", ("fetch_url", 0.8)),
    (
        logging.WARNING,
        "habakkuk.engine.llm.router",
        "model call %s failed: %s",
        ("remote/gpt-5-mini", "remote: rate_limit: Rate limit reached, retry in 2s (req_abc123)"),
    ),
    (logging.INFO, "habakkuk.engine.llm.router", "retrying %s in %.1fs", ("remote/gpt-5", 2.0)),
    (logging.INFO, "aiohttp.access", '127.0.0.1 "POST /v1/chat HTTP/1.1" 200 %d', (1234,)),
    (logging.INFO, "habakkuk.usage", "call %s: %d in, %d out, $%.4f", ("gpt-5", 1200, 300, 0.01)),
    (logging.INFO, "habakkuk.turns", "turn %s finished: %s in %.2fs", ("t_1", "done", 3.2)),
    (logging.INFO, "habakkuk.channels", "delivered %s to %s", ("t_1", "telegram:123")),
]


class TimedHandler(RotatingJsonHandler):
    """habakkuk.log's handler, timing each record it handles."""

    spent = 0.0
    records = 0

    def handle(self, record: logging.LogRecord) -> bool:
        started = time.perf_counter()
        try:
            return super().handle(record)
        finally:
            self.spent += time.perf_counter() - started
            self.records += 1


async def real_turns(root: Path, turns: int) -> tuple[float, float]:
    """(records a turn, handler milliseconds a turn) over `turns` mock turns."""
    sys.path.insert(0, str(Path(__file__).parent))
    from _harness import fresh_home

    from habakkuk.runtime import Runtime

    home = fresh_home(root)
    runtime = await Runtime.open(home)
    # The runtime installed habakkuk.log's handler; swap in the timed one at its place.
    logger = logging.getLogger()
    for handler in list(logger.handlers):
        if isinstance(handler, RotatingJsonHandler):
            logger.removeHandler(handler)
            handler.close()
    timed = TimedHandler(log_path(home.root), max_bytes=20 * 1024 * 1024, backups=5)
    logger.addHandler(timed)
    try:
        runtime.start_workers()
        session = await runtime.sessions.new_session("main")
        for n in range(turns):
            outcome = await runtime.turns.wait_turn(
                await runtime.turns.submit(session.id, f"turn {n}: hello")
            )
            assert outcome.status == "done", outcome
    finally:
        await runtime.close()
        logger.removeHandler(timed)
        timed.close()
    return timed.records / turns, timed.spent / turns * 1000


def busy_turns(root: Path, turns: int) -> list[float]:
    """Milliseconds a busy turn's ten records take through the handler, per turn."""
    handler = RotatingJsonHandler(log_path(root), max_bytes=20 * 1024 * 1024, backups=5)
    log = logging.getLogger("bench.busy")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    samples = []
    for _ in range(turns):
        started = time.perf_counter()
        for level, name, message, args in BUSY_TURN:
            record = logging.LogRecord(name, level, __file__, 1, message, args, None)
            handler.handle(record)
        samples.append((time.perf_counter() - started) * 1000)
    handler.close()
    return samples


def per_call(fn: object, arg: object, rounds: int) -> float:
    """Microseconds a call of fn(arg), median of five runs of `rounds`."""
    assert callable(fn)
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            fn(arg)
        runs.append((time.perf_counter() - started) / rounds * 1e6)
    return statistics.median(runs)


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    REDACTOR.use_values(["remote-key-Qz7xW2pL9vK4mN8b", "telegram-token-value-1234"])
    with tempfile.TemporaryDirectory() as tmp:
        records, real_ms = asyncio.run(real_turns(Path(tmp) / "home", turns))
        busy = busy_turns(Path(tmp), 2000)
    REDACTOR.use_values(["remote-key-Qz7xW2pL9vK4mN8b", "telegram-token-value-1234"])
    print(f"real mock turns ({turns}): {records:.1f} records a turn, {real_ms:.3f} ms a turn")
    print(
        f"busy turn (10 records at INFO): median {statistics.median(busy):.3f} ms,"
        f" p95 {sorted(busy)[int(len(busy) * 0.95)]:.3f} ms a turn (target <= 0.2 ms)"
    )
    short = "turn t_01HX3 finished for session s_abc123 agent main in 1.234s (3 tool calls)"
    error = (
        '{"error": {"message": "Incorrect API key provided: remote-key-Qz7xW2pL9vK4mN8b.",'
        ' "type": "invalid_request_error", "code": "invalid_api_key"}}'
    )
    tool = ("total 48\ndrwxr-xr-x  5 user staff  160 Dec  7 15:00 src\n" * 180)[:10_000]
    blocks = [
        {"type": "text", "text": "Here is what the build printed."},
        {"type": "tool_use", "tool_use_id": "t1", "tool": "exec", "input": {"command": "ls -l"}},
        {"type": "tool_result", "tool_use_id": "t1", "text": tool[:2000]},
    ]
    print(f"redactor: short message {per_call(REDACTOR.text, short, 20000):.2f} µs")
    print(
        f"redactor: provider error body with the key {per_call(REDACTOR.text, error, 20000):.2f} µs"
    )
    print(f"redactor: 10 KB tool result {per_call(REDACTOR.text, tool, 500):.1f} µs")
    print(
        f"redactor: a message's blocks (2 KB result) {per_call(redact_blocks, blocks, 2000):.2f} µs"
    )


if __name__ == "__main__":
    main()
