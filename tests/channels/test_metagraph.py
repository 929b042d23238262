"""The shared Graph client: error codes as typed outcomes, the wait a rate limit asks for,
an empty 2xx answer, and Meta's webhook checks (handshake, signature, media hosts)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from habakkuk.channels.adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from habakkuk.channels.metagraph import (
    GRAPH_VERSION,
    GraphClient,
    GraphFatal,
    WindowClosed,
    graph_error,
    retry_seconds,
)
from habakkuk.channels.metagraph_hook import challenge, media_host_ok, signature_ok
from tests.channels.fake_graph import APP_SECRET, hub_signature


def error(code: int, subcode: int = 0) -> dict[str, object]:
    body: dict[str, object] = {"message": "m", "type": "OAuthException", "code": code}
    if subcode:
        body["error_subcode"] = subcode
    return {"error": body}


@pytest.mark.parametrize("code", [190, 10, 200])
def test_a_refused_token_or_permission_is_fatal(code: int) -> None:
    found = graph_error(400, error(code), {})
    assert isinstance(found, GraphFatal) and isinstance(found, FatalAdapterError)
    assert f"code {code}" in str(found)


@pytest.mark.parametrize(
    ("code", "seconds"),
    [(4, 60.0), (17, 60.0), (32, 60.0), (613, 60.0), (80007, 60.0), (130429, 5.0)],
)
def test_a_rate_limit_is_retry_after_its_wait(code: int, seconds: float) -> None:
    found = graph_error(400, error(code), {})
    assert isinstance(found, RetryAfter) and found.seconds == seconds
    told = graph_error(429, error(code), {"Retry-After": "7"})
    assert isinstance(told, RetryAfter) and told.seconds == 7.0


def test_the_business_use_case_header_gives_the_wait_in_minutes() -> None:
    usage = {"123": [{"type": "whatsapp", "call_count": 100, "estimated_time_to_regain_access": 3}]}
    assert retry_seconds({"X-Business-Use-Case-Usage": json.dumps(usage)}, 60.0) == 180.0
    assert retry_seconds({"X-Business-Use-Case-Usage": "not json"}, 60.0) == 60.0


@pytest.mark.parametrize("code", [131026, 551])
def test_an_unreachable_person_is_undeliverable(code: int) -> None:
    found = graph_error(400, error(code), {})
    assert isinstance(found, Undeliverable) and not isinstance(found, WindowClosed)


def test_the_closed_window_is_its_own_outcome_on_whatsapp_and_messenger() -> None:
    assert isinstance(graph_error(400, error(131047), {}), WindowClosed)
    # Messenger/Instagram: code 10 is a permission, but subcode 2018278 the window
    assert isinstance(graph_error(400, error(10, 2018278), {}), WindowClosed)


def test_anything_else_is_retried() -> None:
    found = graph_error(500, b"<html>", {})
    assert type(found) is SendError and "HTTP 500" in str(found)
    assert type(graph_error(400, error(100), {})) is SendError


@pytest.fixture
async def graph_root() -> AsyncIterator[str]:
    """A Graph root answering 204 with no body to a POST, and an error to a GET."""

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response(error(190), status=401)

    app = web.Application()
    app.router.add_post(f"/{GRAPH_VERSION}/node/thing", empty)
    app.router.add_get(f"/{GRAPH_VERSION}/node", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started TCPSite has its server
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_a_204_is_an_empty_answer_and_errors_are_raised_typed(graph_root: str) -> None:
    graph = GraphClient("token", graph_root)
    try:
        assert await graph.post("node/thing", {"a": 1}) == {}
        with pytest.raises(GraphFatal):
            await graph.get("node")
    finally:
        await graph.close()


async def test_an_unreachable_graph_is_a_send_error() -> None:
    graph = GraphClient("token", "http://127.0.0.1:9")
    try:
        with pytest.raises(SendError):
            await graph.get("node")
    finally:
        await graph.close()


def test_the_handshake_answers_only_our_verify_token() -> None:
    url = "https://h/channels/wa?hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42"
    assert challenge(url, "vt") == "42"
    assert challenge(url, "other") is None
    assert challenge(url.replace("subscribe", "unsubscribe"), "vt") is None
    assert challenge(url + "&hub.verify_token=vt", "vt") is None  # given twice: ambiguous
    assert challenge("https://h/channels/wa?hub.mode=subscribe&hub.verify_token=vt", "vt") is None


def test_the_signature_is_sha256_hmac_of_the_raw_body() -> None:
    body = b'{"object":"page"}'
    assert signature_ok(APP_SECRET, body, hub_signature(APP_SECRET, body))
    assert not signature_ok(APP_SECRET, body + b" ", hub_signature(APP_SECRET, body))
    assert not signature_ok(APP_SECRET, body, hub_signature("other", body))
    assert not signature_ok(APP_SECRET, body, "sha256=\udcff")


def test_media_is_fetched_with_the_token_only_from_metas_hosts() -> None:
    root = "https://graph.facebook.com"
    assert media_host_ok("https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1", root)
    assert media_host_ok("https://scontent.xx.fbcdn.net/v/t1/1.jpg", root)
    assert not media_host_ok("http://lookaside.fbsbx.com/x", root)  # not over TLS
    assert not media_host_ok("https://fbsbx.com.evil.example/x", root)
    assert not media_host_ok("https://evil.example/?fbsbx.com", root)
    assert media_host_ok("http://127.0.0.1:5/x", "http://127.0.0.1:5")  # the root's own host
