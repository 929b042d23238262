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
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ingest import Post, measure, serving
from tests.channels.fake_teams import FakeTeams, signing_key


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


async def main(count: int) -> None:
    async with FakeTeams() as teams:
        await check_only(teams, count * 5)
        await google_check_only(count * 5)
        channel = (
            "    type: teams\n"
            f"    app_id: {teams.app_id}\n    password_env: TEAMS_BENCH_PASSWORD\n"
            f"    base_url: {teams.base_url}\n    allow_from: '*'\n"
        )
        env = {"TEAMS_BENCH_PASSWORD": teams.password}
        async with serving(channel, env, "work") as (url, db, supervisor):
            teams.webhook_url = f"{url}/channels/work"
            assert await supervisor.wait_adapter("work", timeout=60) is not None
            # Each request its own token, as the Connector sends (signed beforehand: the
            # signing is the platform's cost, not ours), from 32 conversations that wrote
            # before (a new one also writes its service URL to the file).
            genuine: list[Post] = [
                partial(
                    teams.post,
                    teams.activity(f"message {i}", conversation=f"a:1chat-{i % 32}"),
                    token=teams.token(),
                )
                for i in range(count)
            ]
            stranger = signing_key("stranger")
            forged: list[Post] = [
                partial(teams.post, teams.activity(f"forged {i}"), token=teams.token(key=stranger))
                for i in range(count)
            ]
            await measure("teams", genuine, forged, db)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
