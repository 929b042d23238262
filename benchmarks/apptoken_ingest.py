"""The app-token platforms' part of benchmarks/webhook_ingest.py: signed webhook requests
per second into queued turns, for each platform's verification, through a runtime's HTTP
server, 32 at a time; the verification alone; forged requests refused per second.

- Feishu/Lark: AES-256-CBC decryption of the event, SHA-256 signature, verification token.
- DingTalk: HMAC-SHA256 of the timestamp and the AppSecret, within an hour.
- WeCom: SHA-1 msg_signature, AES-256-CBC decryption, the receiver id.

Each request's body is built (and encrypted) before the clock starts, so the figures are
the server's work: the check, the parse and the durable turn. Run through
webhook_ingest.py, or alone: `PYTHONPATH=. python benchmarks/apptoken_ingest.py [n]`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ingest import Post, channel_body, measure, serving

# -- Feishu/Lark --------------------------------------------------------------------------


def feishu_check_only(count: int) -> float:
    """Feishu verifications per second (decrypt, token, signature; no HTTP)."""
    from habakkuk.channels.feishu import FeishuAdapter
    from habakkuk.channels.webhook import WebhookDoor, WebhookRequest
    from habakkuk.engine.channel_config import ChannelConfig
    from tests.channels.fake_feishu import (
        ALICE,
        APP_ID,
        ENCRYPT_KEY,
        VERIFICATION_TOKEN,
        FakeFeishu,
        lark_signature,
    )

    config = ChannelConfig(type="feishu", app_id=APP_ID)
    config.name = "lark"
    adapter = FeishuAdapter(
        config, WebhookDoor(), secret="s", encrypt_key=ENCRYPT_KEY,
        verification_token=VERIFICATION_TOKEN,
    )  # fmt: skip
    body = FakeFeishu().sealed(FakeFeishu().message_event(ALICE, "hello there"))
    stamp, nonce = str(int(time.time())), "n0nce"
    headers = {
        "X-Lark-Request-Timestamp": stamp,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": lark_signature(stamp, nonce, ENCRYPT_KEY, body),
    }
    request = WebhookRequest("POST", "https://bot.example.org/channels/lark", headers, body)
    started = time.perf_counter()
    for _ in range(count):
        assert adapter.verify(request)
    return count / (time.perf_counter() - started)


async def feishu(count: int) -> None:
    from tests.channels.fake_feishu import FakeFeishu, FeishuDriver

    print(f"feishu verification alone: {feishu_check_only(count * 10):,.0f}/s")
    async with FakeFeishu() as fake:
        driver = FeishuDriver(fake)
        channel = channel_body(driver.channel_yaml("lark"))
        async with serving(channel, driver.env(), "lark") as (url, db, supervisor):
            driver.called_at(f"{url}/channels/lark")
            assert await supervisor.wait_adapter("lark", timeout=60) is not None
            events = [
                fake.sealed(
                    fake.message_event(f"ou_{i % 997:032d}", f"m {i}", chat=f"oc_{i % 997}")
                )
                for i in range(count)
            ]
            genuine: list[Post] = [lambda b=b: fake.post({}, body=b) for b in events]  # type: ignore[misc]  # default-bound lambdas
            forged: list[Post] = [
                lambda b=b: fake.post({}, body=b, sign_key="wrong") for b in events
            ]  # type: ignore[misc]  # default-bound lambdas
            await measure("feishu", genuine, forged, db)


# -- DingTalk -----------------------------------------------------------------------------


def dingtalk_check_only(count: int) -> float:
    """DingTalk verifications per second (the HMAC and the hour; no HTTP)."""
    from habakkuk.channels.dingtalk_wire import signed
    from tests.channels.fake_dingtalk import APP_SECRET, dingtalk_sign

    now = int(time.time() * 1000)
    stamp = str(now)
    given = dingtalk_sign(stamp, APP_SECRET)
    started = time.perf_counter()
    for _ in range(count):
        assert signed(stamp, APP_SECRET, given, now)
    return count / (time.perf_counter() - started)


async def dingtalk(count: int) -> None:
    from tests.channels.fake_dingtalk import DingTalkDriver, FakeDingTalk

    print(f"dingtalk verification alone: {dingtalk_check_only(count * 10):,.0f}/s")
    async with FakeDingTalk() as fake:
        driver = DingTalkDriver(fake)
        channel = channel_body(driver.channel_yaml("ding"))
        async with serving(channel, driver.env(), "ding") as (url, db, supervisor):
            driver.called_at(f"{url}/channels/ding")
            assert await supervisor.wait_adapter("ding", timeout=60) is not None
            messages = [fake.message(f"staff-{i % 997:06d}", f"m {i}") for i in range(count)]
            genuine: list[Post] = [lambda m=m: fake.post(m) for m in messages]  # type: ignore[misc]  # default-bound lambdas
            forged: list[Post] = [lambda m=m: fake.post(m, secret="wrong") for m in messages]  # type: ignore[misc]  # default-bound lambdas
            await measure("dingtalk", genuine, forged, db)


# -- WeCom --------------------------------------------------------------------------------


def wecom_check_only(count: int) -> float:
    """WeCom verifications per second (signature, XML, decryption; no HTTP)."""
    from urllib.parse import urlencode

    from habakkuk.channels.webhook import WebhookDoor, WebhookRequest
    from habakkuk.channels.wecom import WeComAdapter
    from habakkuk.channels.wecom_wire import aes_key
    from habakkuk.engine.channel_config import ChannelConfig
    from tests.channels.fake_wecom import (
        AES_KEY,
        AGENT_ID,
        ALICE,
        CORP_ID,
        TOKEN,
        FakeWeCom,
        wecom_encrypt,
        wecom_signature,
    )

    config = ChannelConfig(type="wecom", corp_id=CORP_ID, agent_id=AGENT_ID)
    config.name = "work"
    adapter = WeComAdapter(config, WebhookDoor(), secret="s", token=TOKEN, key=aes_key(AES_KEY))
    fake = FakeWeCom()
    encrypted = wecom_encrypt(AES_KEY, fake.message(ALICE, "hello there"), CORP_ID)
    stamp, nonce = str(int(time.time())), "n0nce"
    query = urlencode(
        {"msg_signature": wecom_signature(TOKEN, stamp, nonce, encrypted),
         "timestamp": stamp, "nonce": nonce}
    )  # fmt: skip
    request = WebhookRequest(
        "POST", f"https://bot.example.org/channels/work?{query}", {}, fake.envelope(encrypted)
    )
    started = time.perf_counter()
    for _ in range(count):
        assert adapter.verify(request)
    return count / (time.perf_counter() - started)


async def wecom(count: int) -> None:
    from tests.channels.fake_wecom import FakeWeCom, WeComDriver

    print(f"wecom verification alone: {wecom_check_only(count * 10):,.0f}/s")
    async with FakeWeCom() as fake:
        driver = WeComDriver(fake)
        channel = channel_body(driver.channel_yaml("work"))
        async with serving(channel, driver.env(), "work") as (url, db, supervisor):
            driver.called_at(f"{url}/channels/work")
            assert await supervisor.wait_adapter("work", timeout=60) is not None
            messages = [fake.message(f"user{i % 997}", f"m {i}") for i in range(count)]
            genuine: list[Post] = [lambda m=m: fake.post(m) for m in messages]  # type: ignore[misc]  # default-bound lambdas
            forged: list[Post] = [lambda m=m: fake.post(m, token="wrong") for m in messages]  # type: ignore[misc]  # default-bound lambdas
            await measure("wecom", genuine, forged, db)


async def main(count: int) -> None:
    """Every app-token platform's figures."""
    await feishu(count)
    await dingtalk(count)
    await wecom(count)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
