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
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fresh_home, mock_config
from tests.channels.fake_twilio import BOT_NUMBER, FakeTwilio

CONCURRENCY = 32


def turns(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'turn'").fetchone()[0])


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


async def post_all(twilio: FakeTwilio, batches: list[list[tuple[str, str]]], **forge: str) -> int:
    """POST every request, CONCURRENCY at a time; the number answered 200."""
    queue = list(batches)
    ok = 0

    async def worker() -> None:
        nonlocal ok
        while queue:
            status, _ = await twilio.post(queue.pop(), **forge)  # type: ignore[arg-type]  # only the str overrides
            ok += status == 200

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return ok


async def main(count: int) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    print(f"sms signature check alone: {check_only(count * 20):,.0f}/s")
    async with FakeTwilio() as twilio:
        with tempfile.TemporaryDirectory() as root:
            channel = (
                "http: {}\nchannels:\n  text:\n    type: sms\n"
                f"    account_sid: {twilio.sid}\n    token_env: TWILIO_BENCH_TOKEN\n"
                f"    from: '{BOT_NUMBER}'\n    base_url: {twilio.base_url}\n"
                "    allow_from: '*'\n"
            )
            home = fresh_home(root, mock_config(mode="full", extra=channel))
            (Path(root) / ".env").write_text(f"TWILIO_BENCH_TOKEN={twilio.token}\n")
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                channels = runtime.channel_service()
                channels.start()  # the gateway and adapters, no turn workers
                await channels.started()
                server = await runtime.http.start("127.0.0.1:0")
                twilio.webhook_url = f"{server.url}/channels/text"
                up = await channels.supervisor.wait_adapter("text", timeout=60)
                assert up is not None, "the sms adapter did not connect"
                requests = [
                    twilio.message(f"+1555{i % 997:07d}", f"message {i}") for i in range(count)
                ]
                started = time.perf_counter()
                ok = await post_all(twilio, requests)
                took = time.perf_counter() - started
                queued = turns(home.db_path("control"))
                assert ok == count == queued, (ok, count, queued)
                print(f"sms signed requests into queued turns: {count / took:,.0f}/s "
                      f"({count} in {took:.2f}s, {CONCURRENCY} at a time)")  # fmt: skip
                forged = [twilio.message("+15550000002", f"forged {i}") for i in range(count)]
                started = time.perf_counter()
                ok = await post_all(twilio, forged, token="wrong-key")
                took = time.perf_counter() - started
                assert ok == 0 and turns(home.db_path("control")) == queued
                print(f"sms forged requests refused (403, no turn): {count / took:,.0f}/s")
            finally:
                await runtime.close()


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


async def post_events(fake: Any, events: list[dict[str, Any]], **forge: str) -> int:
    """POST every event, CONCURRENCY at a time; the number answered 200."""
    queue = list(events)
    ok = 0

    async def worker() -> None:
        nonlocal ok
        while queue:
            status, _ = await fake.post(queue.pop(), **forge)
            ok += status == 200

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return ok


async def graph_platform(count: int, kind: str) -> None:
    """Signed Meta events (WhatsApp Cloud, Messenger, Instagram) into queued turns, and
    forged ones refused."""
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime
    from tests.channels.fake_graph import FakeWhatsAppCloud, WhatsAppCloudDriver
    from tests.channels.fake_messenger import FakeMessenger, MessengerDriver

    fake: Any = FakeWhatsAppCloud() if kind == "whatsappcloud" else FakeMessenger(kind)
    async with fake:
        driver: Any = (
            WhatsAppCloudDriver(fake) if kind == "whatsappcloud" else MessengerDriver(fake)
        )
        with tempfile.TemporaryDirectory() as root:
            lines = [*driver.channel_yaml("biz").splitlines(), "allow_from: '*'"]
            channel = "http: {}\nchannels:\n  biz:\n" + "".join(
                f"    {line}\n" for line in lines if not line.startswith("allow_from: [")
            )
            home = fresh_home(root, mock_config(mode="full", extra=channel))
            env = "".join(f"{name}={value}\n" for name, value in driver.env().items())
            (Path(root) / ".env").write_text(env)
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                channels = runtime.channel_service()
                channels.start()
                await channels.started()
                server = await runtime.http.start("127.0.0.1:0")
                fake.webhook_url = f"{server.url}/channels/biz"
                up = await channels.supervisor.wait_adapter("biz", timeout=60)
                assert up is not None, f"the {kind} adapter did not connect"
                events = [fake.text(f"1555{i % 997:07d}", f"message {i}") for i in range(count)]
                started = time.perf_counter()
                ok = await post_events(fake, events)
                took = time.perf_counter() - started
                queued = turns(home.db_path("control"))
                assert ok == count == queued, (ok, count, queued)
                print(f"{kind} signed events into queued turns: {count / took:,.0f}/s "
                      f"({count} in {took:.2f}s, {CONCURRENCY} at a time)")  # fmt: skip
                forged = [fake.text("15550000002", f"forged {i}") for i in range(count)]
                started = time.perf_counter()
                ok = await post_events(fake, forged, secret="wrong-key")
                took = time.perf_counter() - started
                assert ok == 0 and turns(home.db_path("control")) == queued
                print(f"{kind} forged events refused (403, no turn): {count / took:,.0f}/s")
            finally:
                await runtime.close()


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
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime
    from tests.channels.fake_line import FakeLine

    print(f"line signature check alone: {line_check_only(count * 20):,.0f}/s")
    async with FakeLine() as line:
        with tempfile.TemporaryDirectory() as root:
            channel = (
                "http: {}\nchannels:\n  line:\n    type: line\n"
                "    token_env: LINE_BENCH_TOKEN\n    secret_env: LINE_BENCH_SECRET\n"
                f"    base_url: {line.base_url}\n    allow_from: '*'\n"
            )
            home = fresh_home(root, mock_config(mode="full", extra=channel))
            (Path(root) / ".env").write_text(
                f"LINE_BENCH_TOKEN={line.token}\nLINE_BENCH_SECRET={line.secret}\n"
            )
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                channels = runtime.channel_service()
                channels.start()  # the gateway and adapters, no turn workers
                await channels.started()
                server = await runtime.http.start("127.0.0.1:0")
                line.webhook_url = f"{server.url}/channels/line"
                up = await channels.supervisor.wait_adapter("line", timeout=60)
                assert up is not None, "the line adapter did not connect"

                async def post_all(bodies: list[bytes], **forge: str) -> int:
                    ok = 0

                    async def worker() -> None:
                        nonlocal ok
                        while bodies:
                            status, _ = await line.post(bodies.pop(), **forge)
                            ok += status == 200

                    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
                    return ok

                users = [f"U{i % 997:032x}" for i in range(count)]
                bodies = [line.body(line.text(u, f"message {i}")) for i, u in enumerate(users)]
                started = time.perf_counter()
                ok = await post_all(bodies)
                took = time.perf_counter() - started
                queued = turns(home.db_path("control"))
                assert ok == count == queued, (ok, count, queued)
                print(f"line signed requests into queued turns: {count / took:,.0f}/s "
                      f"({count} in {took:.2f}s, {CONCURRENCY} at a time)")  # fmt: skip
                forged = [line.body(line.text(users[0], f"forged {i}")) for i in range(count)]
                started = time.perf_counter()
                ok = await post_all(forged, secret="f" * 32)
                took = time.perf_counter() - started
                assert ok == 0 and turns(home.db_path("control")) == queued
                print(f"line forged requests refused (403, no turn): {count / took:,.0f}/s")
            finally:
                await runtime.close()


async def bluebubbles_main(count: int) -> None:
    """BlueBubbles' webhook events (the URL's secret) into queued turns, and forged ones."""
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime
    from tests.channels.fake_bluebubbles import FakeBlueBubbles

    async with FakeBlueBubbles() as server:
        with tempfile.TemporaryDirectory() as root:
            channel = (
                "http: {}\nchannels:\n  imessage:\n    type: bluebubbles\n"
                f"    base_url: {server.base_url}\n    password_env: BB_BENCH_PASSWORD\n"
                "    secret_env: BB_BENCH_SECRET\n    allow_from: '*'\n"
            )
            home = fresh_home(root, mock_config(mode="full", extra=channel))
            (Path(root) / ".env").write_text(
                f"BB_BENCH_PASSWORD={server.password}\nBB_BENCH_SECRET={server.secret}\n"
            )
            config = parse_config(home.config_path.read_text(), home.config_path, home)
            runtime = await Runtime.open(home, config)
            try:
                channels = runtime.channel_service()
                channels.start()  # the gateway and adapters, no turn workers
                await channels.started()
                http = await runtime.http.start("127.0.0.1:0")
                server.webhook_url = f"{http.url}/channels/imessage"
                up = await channels.supervisor.wait_adapter("imessage", timeout=60)
                assert up is not None, "the bluebubbles adapter did not connect"

                async def post_all(events: list[dict[str, object]], **forge: str) -> int:
                    ok = 0

                    async def worker() -> None:
                        nonlocal ok
                        while events:
                            status, _ = await server.post(events.pop(), **forge)
                            ok += status == 200

                    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
                    return ok

                events = [server.message(f"+1555{i % 997:07d}", f"m {i}") for i in range(count)]
                started = time.perf_counter()
                ok = await post_all(events)
                took = time.perf_counter() - started
                queued = turns(home.db_path("control"))
                assert ok == count == queued, (ok, count, queued)
                print(f"bluebubbles requests into queued turns: {count / took:,.0f}/s "
                      f"({count} in {took:.2f}s, {CONCURRENCY} at a time)")  # fmt: skip
                forged = [server.message("+15550000002", f"forged {i}") for i in range(count)]
                started = time.perf_counter()
                ok = await post_all(forged, secret="x" * len(server.secret))
                took = time.perf_counter() - started
                assert ok == 0 and turns(home.db_path("control")) == queued
                print(f"bluebubbles forged requests refused (403, no turn): {count / took:,.0f}/s")
            finally:
                await runtime.close()


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
