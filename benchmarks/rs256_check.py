"""The cost of the RS256 checks of Teams' and Google Chat's webhooks with cached keys,
and Teams' signed webhook requests per second into queued turns.

1. The check alone: `KeySet.check` (habakkuk/channels/jwks.py) on a Bot Framework token
   signed with a 2048-bit test key whose public half is already held: per request,
   median and p95 over N checks (one RSA signature check and the claim checks each).
2. End to end: the fake Bot Framework (tests/channels/fake_teams.py) POSTs N activities
   from many conversations, each with its own freshly signed JWT, to a runtime's HTTP
   server at /channels/<account>, 32 at a time; each 200 means the token was checked
   (signature, issuer, audience, expiry, serviceUrl, endorsement) and the turn is queued
   durably. Also: forged tokens (a key nobody published) refused per second.

Run: `PYTHONPATH=. python benchmarks/rs256_check.py [requests]`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fresh_home, mock_config
from tests.channels.fake_teams import FakeTeams, signing_key

CONCURRENCY = 32


def turns(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'turn'").fetchone()[0])


async def check_only(teams: FakeTeams, count: int) -> None:
    """Per-check cost with the keys cached: median and p95 in microseconds."""
    import aiohttp

    from habakkuk.channels.jwks import KeySet
    from habakkuk.channels.teams_wire import token_rules

    keys = KeySet(metadata_url=f"{teams.base_url}/v1/.well-known/openidconfiguration")
    rules = token_rules(teams.app_id)
    token = teams.token()
    async with aiohttp.ClientSession() as http:
        await keys.ready_for(token, http)
    took: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        assert keys.check(token, rules) is not None
        took.append(time.perf_counter() - started)
    took.sort()
    median = statistics.median(took) * 1e6
    p95 = took[int(len(took) * 0.95)] * 1e6
    print(f"rs256 check with cached keys: median {median:,.0f} us, p95 {p95:,.0f} us "
          f"({count} checks, {1e6 / median:,.0f}/s on one core)")  # fmt: skip


async def google_check_only(count: int) -> None:
    """The same for a Google Chat token (issuer chat@system.gserviceaccount.com)."""
    import aiohttp

    from habakkuk.channels.googlechat_wire import keys_url, token_rules
    from habakkuk.channels.jwks import KeySet
    from tests.channels.fake_googlechat import PROJECT, FakeGoogleChat

    async with FakeGoogleChat() as chat:
        keys = KeySet(jwks_url=keys_url(PROJECT, chat.base_url))
        rules = token_rules(PROJECT)
        token = chat.token()
        async with aiohttp.ClientSession() as http:
            await keys.ready_for(token, http)
        took: list[float] = []
        for _ in range(count):
            started = time.perf_counter()
            assert keys.check(token, rules) is not None
            took.append(time.perf_counter() - started)
    took.sort()
    median = statistics.median(took) * 1e6
    p95 = took[int(len(took) * 0.95)] * 1e6
    print(f"google chat rs256 check with cached keys: median {median:,.0f} us, "
          f"p95 {p95:,.0f} us ({count} checks)")  # fmt: skip


async def post_all(teams: FakeTeams, batch: list[tuple[dict[str, Any], str]]) -> int:
    """POST every (activity, token), CONCURRENCY at a time; the number answered 200."""
    queue = list(batch)
    ok = 0

    async def worker() -> None:
        nonlocal ok
        while queue:
            activity, token = queue.pop()
            status, _ = await teams.post(activity, token=token)
            ok += status == 200

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return ok


async def main(count: int) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    async with FakeTeams() as teams:
        await check_only(teams, count * 5)
        await google_check_only(count * 5)
        with tempfile.TemporaryDirectory() as root:
            channel = (
                "http: {}\nchannels:\n  work:\n    type: teams\n"
                f"    app_id: {teams.app_id}\n    password_env: TEAMS_BENCH_PASSWORD\n"
                f"    base_url: {teams.base_url}\n    allow_from: '*'\n"
            )
            home = fresh_home(root, mock_config(mode="full", extra=channel))
            (Path(root) / ".env").write_text(f"TEAMS_BENCH_PASSWORD={teams.password}\n")
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                channels = runtime.channel_service()
                channels.start()  # the gateway and adapters, no turn workers
                await channels.started()
                server = await runtime.http.start("127.0.0.1:0")
                teams.webhook_url = f"{server.url}/channels/work"
                up = await channels.supervisor.wait_adapter("work", timeout=60)
                assert up is not None, "the teams adapter did not connect"
                # Each request its own token, as the Connector sends (signed beforehand:
                # the signing is the platform's cost, not ours), from 32 conversations
                # that wrote before (a new one also writes its service URL to the file).
                batch = [
                    (teams.activity(f"message {i}", conversation=f"a:1chat-{i % 32}"),
                     teams.token())
                    for i in range(count)
                ]  # fmt: skip
                started = time.perf_counter()
                ok = await post_all(teams, batch)
                took = time.perf_counter() - started
                queued = turns(home.db_path("control"))
                assert ok == count == queued, (ok, count, queued)
                print(f"teams signed requests into queued turns: {count / took:,.0f}/s "
                      f"({count} in {took:.2f}s, {CONCURRENCY} at a time)")  # fmt: skip
                stranger = signing_key("stranger")
                forged = [
                    (teams.activity(f"forged {i}"), teams.token(key=stranger)) for i in range(count)
                ]
                started = time.perf_counter()
                ok = await post_all(teams, forged)
                took = time.perf_counter() - started
                assert ok == 0 and turns(home.db_path("control")) == queued
                print(f"teams forged tokens refused (403, no turn): {count / took:,.0f}/s")
            finally:
                await runtime.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
