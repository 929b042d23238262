"""Webhook requests per second into queued turns, per webhook platform's verification.

For SMS (Twilio, X-Twilio-Signature: HMAC-SHA1 over the URL and the sorted form): the
fake Twilio (tests/channels/fake_twilio.py) POSTs signed messages from many numbers to a
runtime's HTTP server at /channels/<account>, 32 at a time; each 200 means the signature
was checked and the turn is queued durably. Also printed: the signature check alone, and
forged requests refused per second (no turn, nothing written).

For Meta's platforms, the WhatsApp Business Cloud API, Messenger and Instagram
(X-Hub-Signature-256: HMAC-SHA256 of the raw body with the app secret,
habakkuk/channels/metagraph_hook.py): the same, from their fakes
(tests/channels/fake_graph.py, fake_messenger.py) posting signed message events.

For LINE (X-Line-Signature: HMAC-SHA256 of the raw body with the channel secret): the
fake LINE (tests/channels/fake_line.py) POSTs signed event batches of one text message
each from many users the same way. For BlueBubbles (a secret in the URL, compared in
constant time) the fake server POSTs new-message events the same way.

Run: `PYTHONPATH=. python benchmarks/webhook_ingest.py [requests]`.
Target: >= 500 signed requests/s into queued turns for the HMAC platforms.
"""

from __future__ import annotations

import asyncio
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ingest import Post, channel_body, measure, serving
from tests.channels.fake_twilio import BOT_NUMBER, FakeTwilio


def check_only(count: int) -> float:
    """Signature checks per second (the adapter's verify, no HTTP)."""
    from urllib.parse import urlencode

    from habakkuk.channels.sms_wire import form_params, signed
    from tests.channels.fake_twilio import twilio_signature

    twilio = FakeTwilio()
    params = twilio.message("+15550000001", "hello there")
    url = "https://bot.example.org/channels/text"
    body = urlencode(params).encode()
    given = twilio_signature(twilio.token, url, params)
    started = time.perf_counter()
    for _ in range(count):
        assert signed(twilio.token, url, form_params(body), given)
    return count / (time.perf_counter() - started)


async def main(count: int) -> None:
    """SMS: signed Twilio requests into queued turns, and forged ones refused."""
    print(f"sms signature check alone: {check_only(count * 20):,.0f}/s")
    async with FakeTwilio() as twilio:
        channel = (
            "    type: sms\n"
            f"    account_sid: {twilio.sid}\n    token_env: TWILIO_BENCH_TOKEN\n"
            f"    from: '{BOT_NUMBER}'\n    base_url: {twilio.base_url}\n"
            "    allow_from: '*'\n"
        )
        env = {"TWILIO_BENCH_TOKEN": twilio.token}
        async with serving(channel, env, "text") as (url, db, supervisor):
            twilio.webhook_url = f"{url}/channels/text"
            assert await supervisor.wait_adapter("text", timeout=60) is not None
            genuine: list[Post] = [
                partial(twilio.post, twilio.message(f"+1555{i % 997:07d}", f"message {i}"))
                for i in range(count)
            ]
            forged: list[Post] = [
                partial(
                    twilio.post, twilio.message("+15550000002", f"forged {i}"), token="wrong-key"
                )
                for i in range(count)
            ]
            await measure("sms", genuine, forged, db)


def graph_check_only(count: int) -> float:
    """X-Hub-Signature-256 checks per second (the adapter's check, no HTTP)."""
    import json

    from habakkuk.channels.metagraph_hook import signature_ok
    from tests.channels.fake_graph import APP_SECRET, FakeWhatsAppCloud, hub_signature

    body = json.dumps(FakeWhatsAppCloud().text("15550000001", "hello there")).encode()
    given = hub_signature(APP_SECRET, body)
    started = time.perf_counter()
    for _ in range(count):
        assert signature_ok(APP_SECRET, body, given)
    return count / (time.perf_counter() - started)


async def graph_platform(count: int, kind: str) -> None:
    """Signed Meta events (WhatsApp Cloud, Messenger, Instagram) into queued turns, and
    forged ones refused."""
    from tests.channels.fake_graph import FakeWhatsAppCloud, WhatsAppCloudDriver
    from tests.channels.fake_messenger import FakeMessenger, MessengerDriver

    fake: Any = FakeWhatsAppCloud() if kind == "whatsappcloud" else FakeMessenger(kind)
    async with fake:
        driver: Any = (
            WhatsAppCloudDriver(fake) if kind == "whatsappcloud" else MessengerDriver(fake)
        )
        async with serving(channel_body(driver.channel_yaml("biz")), driver.env(), "biz") as (
            url,
            db,
            supervisor,
        ):
            fake.webhook_url = f"{url}/channels/biz"
            assert await supervisor.wait_adapter("biz", timeout=60) is not None
            genuine: list[Post] = [
                partial(fake.post, fake.text(f"1555{i % 997:07d}", f"message {i}"))
                for i in range(count)
            ]
            forged: list[Post] = [
                partial(fake.post, fake.text("15550000002", f"forged {i}"), secret="wrong-key")
                for i in range(count)
            ]
            await measure(kind, genuine, forged, db, what="signed events")


def line_check_only(count: int) -> float:
    """LINE signature checks per second (the adapter's verify, no HTTP)."""
    from habakkuk.channels.line_wire import signed
    from tests.channels.fake_line import FakeLine, line_signature

    line = FakeLine()
    body = line.body(line.text("U" + "0" * 32, "hello there"))
    given = line_signature(line.secret, body)
    started = time.perf_counter()
    for _ in range(count):
        assert signed(line.secret, body, given)
    return count / (time.perf_counter() - started)


async def line_main(count: int) -> None:
    """LINE's signed event batches into queued turns, and forged ones refused."""
    from tests.channels.fake_line import FakeLine

    print(f"line signature check alone: {line_check_only(count * 20):,.0f}/s")
    async with FakeLine() as line:
        channel = (
            "    type: line\n"
            "    token_env: LINE_BENCH_TOKEN\n    secret_env: LINE_BENCH_SECRET\n"
            f"    base_url: {line.base_url}\n    allow_from: '*'\n"
        )
        env = {"LINE_BENCH_TOKEN": line.token, "LINE_BENCH_SECRET": line.secret}
        async with serving(channel, env, "line") as (url, db, supervisor):
            line.webhook_url = f"{url}/channels/line"
            assert await supervisor.wait_adapter("line", timeout=60) is not None
            users = [f"U{i % 997:032x}" for i in range(count)]
            genuine: list[Post] = [
                partial(line.post, line.body(line.text(user, f"message {i}")))
                for i, user in enumerate(users)
            ]
            forged: list[Post] = [
                partial(line.post, line.body(line.text(users[0], f"forged {i}")), secret="f" * 32)
                for i in range(count)
            ]
            await measure("line", genuine, forged, db)


async def bluebubbles_main(count: int) -> None:
    """BlueBubbles' webhook events (the URL's secret) into queued turns, and forged ones."""
    from tests.channels.fake_bluebubbles import FakeBlueBubbles

    async with FakeBlueBubbles() as server:
        channel = (
            "    type: bluebubbles\n"
            f"    base_url: {server.base_url}\n    password_env: BB_BENCH_PASSWORD\n"
            "    secret_env: BB_BENCH_SECRET\n    allow_from: '*'\n"
        )
        env = {"BB_BENCH_PASSWORD": server.password, "BB_BENCH_SECRET": server.secret}
        async with serving(channel, env, "imessage") as (url, db, supervisor):
            server.webhook_url = f"{url}/channels/imessage"
            assert await supervisor.wait_adapter("imessage", timeout=60) is not None
            wrong = "x" * len(server.secret)
            genuine: list[Post] = [
                partial(server.post, server.message(f"+1555{i % 997:07d}", f"m {i}"))
                for i in range(count)
            ]
            forged: list[Post] = [
                partial(server.post, server.message("+15550000002", f"forged {i}"), secret=wrong)
                for i in range(count)
            ]
            await measure("bluebubbles", genuine, forged, db, what="requests")


async def every_platform(count: int) -> None:
    """Each webhook platform in turn: SMS, the app-token platforms
    (benchmarks/apptoken_ingest.py), then Meta's, LINE and BlueBubbles."""
    from benchmarks import apptoken_ingest

    await main(count)
    await apptoken_ingest.main(count)
    print(f"X-Hub-Signature-256 check alone (Meta): {graph_check_only(count * 20):,.0f}/s")
    for kind in ("whatsappcloud", "messenger", "instagram"):
        await graph_platform(count, kind)
    await line_main(count)
    await bluebubbles_main(count)


if __name__ == "__main__":
    asyncio.run(every_platform(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
