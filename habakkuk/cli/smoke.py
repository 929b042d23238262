"""`habakkuk --smoke`: one offline turn through the real queue and stores, in a temporary home."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from habakkuk.cli.common import open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK


def main(args: argparse.Namespace) -> int:
    """One full turn with the mock provider in a temporary home."""
    return run_async(_smoke())


async def _smoke() -> int:
    from habakkuk.engine.home import Home
    from habakkuk.engine.starter import SMOKE_CONFIG
    from habakkuk.engine.timeouts import wait_within

    with tempfile.TemporaryDirectory(prefix="habakkuk-smoke-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(SMOKE_CONFIG, encoding="utf-8")
        runtime = await open_runtime(home)
        try:
            session = await runtime.sessions.new_session(origin="smoke")
            runtime.start_workers()
            turn = await runtime.turns.submit(session.id, "smoke test")
            outcome = await wait_within(runtime.turns.wait_turn(turn), 60)
            messages = await runtime.sessions.messages(session.id)
        finally:
            await runtime.close()
    roles = [m.role for m in messages]
    problems = []
    if outcome.status != "done":
        problems.append(f"turn {outcome.status}: {outcome.error}")
    if "smoke reply" not in outcome.reply:
        problems.append(f"unexpected reply {outcome.reply!r}")
    if roles != ["user", "assistant", "user", "assistant"]:
        problems.append(f"unexpected transcript roles {roles}")
    elif messages[2].message.tool_results[0].is_error:
        problems.append(f"tool call failed: {messages[2].message.tool_results[0].text}")
    if problems:
        print("smoke: FAILED: " + "; ".join(problems))
        return EXIT_FAILED
    print("smoke: ok")
    return EXIT_OK
