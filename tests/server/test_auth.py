"""Spec 001 conventions: token, loopback Host, 415, 403 cross-site, JSON errors, quiet 500s."""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from tests.conftest import mock_config

PROTECTED = [
    "/api/app",
    "/api/overview",
    "/api/sessions",
    "/api/approvals",
    "/v1/models",
    "/metrics",
]


async def test_every_protected_path_needs_the_bearer_token(serve: Any) -> None:
    served = await serve(mock_config())
    for path in PROTECTED:
        async with served.client.get(served.url + path) as response:
            assert response.status == 401, path
            body = await response.json()
            assert "token" in str(body["error"]), path
            assert response.headers["WWW-Authenticate"] == "Bearer"
        bad = {"Authorization": "Bearer wrong-token"}
        async with served.client.get(served.url + path, headers=bad) as response:
            assert response.status == 401, path
        basic = {"Authorization": f"Basic {served.token}"}
        async with served.client.get(served.url + path, headers=basic) as response:
            assert response.status == 401, path
        async with served.client.get(served.url + path, headers=served.auth()) as response:
            assert response.status == 200, path


async def test_health_readiness_and_the_static_dashboard_need_no_token(serve: Any) -> None:
    served = await serve(mock_config())
    async with served.client.get(served.url + "/healthz") as response:
        assert response.status == 200
        health = await response.json()
    age = health["queue"].pop("age_seconds")
    assert health == {"status": "ok", "channels": [], "queue": {"pending": 0, "running": 0}}
    assert isinstance(age, float) and age >= 0
    async with served.client.get(served.url + "/readyz") as response:
        assert response.status == 200
        assert (await response.json())["status"] == "ready"
    async with served.client.get(served.url + "/app/") as response:
        assert response.status == 200
        assert response.content_type == "text/html"
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


async def test_public_metrics_answer_without_the_token(serve: Any) -> None:
    served = await serve(mock_config(extra="http:\n  metrics: {public: true}\n"))
    async with served.client.get(served.url + "/metrics") as response:
        assert response.status == 200
        assert "habakkuk_build_info" in await response.text()
    async with served.client.get(served.url + "/api/app") as response:
        assert response.status == 401


async def test_cross_site_and_same_site_requests_are_refused(serve: Any) -> None:
    served = await serve(mock_config())
    for site in ("cross-site", "same-site"):
        headers = served.auth(**{"Sec-Fetch-Site": site})
        async with served.client.get(served.url + "/api/app", headers=headers) as response:
            assert response.status == 403
            assert "cross-site" in (await response.json())["error"]
        async with served.client.get(served.url + "/healthz", headers=headers) as response:
            assert response.status == 403
    for site in ("same-origin", "none"):
        headers = served.auth(**{"Sec-Fetch-Site": site})
        async with served.client.get(served.url + "/api/app", headers=headers) as response:
            assert response.status == 200


async def test_changes_must_be_json(serve: Any) -> None:
    served = await serve(mock_config())
    url = served.url + "/api/chat"
    for ctype, data in [
        ("text/plain", b'{"conversation": "c", "text": "hi"}'),
        ("application/x-www-form-urlencoded", b"conversation=c&text=hi"),
    ]:
        headers = served.auth(**{"Content-Type": ctype})
        async with served.client.post(url, data=data, headers=headers) as response:
            assert response.status == 415
            assert (await response.json()) == {"error": "send Content-Type: application/json"}
    form = aiohttp.FormData()
    form.add_field("conversation", "c")
    form.add_field("text", "hi")
    form.add_field("file", b"data", filename="a.txt", content_type="text/plain")
    async with served.client.post(url, data=form, headers=served.auth()) as response:
        assert response.status == 403
        assert "X-Habakkuk-Client" in (await response.json())["error"]


async def test_bad_json_is_400_and_unknown_things_are_404(serve: Any) -> None:
    served = await serve(mock_config())
    headers = served.auth(**{"Content-Type": "application/json"})
    for body in (b"{not json", b"[1, 2]", b"", b'"text"'):
        async with served.client.post(
            served.url + "/api/chat", data=body, headers=headers
        ) as response:
            assert response.status == 400, body
            assert isinstance((await response.json())["error"], str)
    for path in ("/api/nope", "/api/sessions/ses_missing", "/api/sessions?agent=ghost"):
        async with served.client.get(served.url + path, headers=served.auth()) as response:
            assert response.status == 404, path
            assert isinstance((await response.json())["error"], str)
    async with served.client.get(served.url + "/nope") as response:
        assert response.status == 401  # nothing is discoverable without the token


async def test_a_500_keeps_its_details_out_of_the_response(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = await serve(mock_config())

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("database password is hunter2")

    monkeypatch.setattr(served.runtime.sessions, "list_sessions", broken)
    async with served.client.get(served.url + "/api/sessions", headers=served.auth()) as response:
        assert response.status == 500
        text = await response.text()
    assert "hunter2" not in text
    assert "error" in text


async def test_without_a_token_only_loopback_host_names_are_answered(serve: Any) -> None:
    served = await serve(mock_config(), token=False)
    port = served.server.port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
        async with served.client.get(served.url + "/api/app", headers={"Host": host}) as response:
            assert response.status == 200, host
    for host in ("evil.example", f"evil.example:{port}", "192.168.1.5", "localhost.evil.example"):
        async with served.client.get(served.url + "/api/app", headers={"Host": host}) as response:
            assert response.status == 403, host
            assert "loopback" in (await response.json())["error"]


async def test_without_a_token_the_server_refuses_a_non_loopback_address(
    serve: Any, home: Any
) -> None:
    text = mock_config(extra="http:\n  listen: 0.0.0.0:8484\n")
    with pytest.raises(ConfigError, match="only listens on loopback"):
        parse_config(text, home.config_path, home)
    served = await serve(mock_config(), token=False)
    await served.runtime.http.stop()
    with pytest.raises(ConfigError, match="loopback"):
        await served.runtime.http.start("0.0.0.0:0")


async def test_a_token_variable_that_is_not_set_stops_the_server_from_starting(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HABAKKUK_MISSING_TOKEN", raising=False)
    runtime = await runtime_factory(
        mock_config(extra="http:\n  token_env: HABAKKUK_MISSING_TOKEN\n")
    )
    with pytest.raises(ConfigError, match="HABAKKUK_MISSING_TOKEN is not set"):
        await runtime.http.start("127.0.0.1:0")


async def test_the_server_listens_on_the_configured_port_and_stops_with_the_runtime(
    runtime_factory: Any,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runtime = await runtime_factory(mock_config(extra=f"http:\n  listen: 127.0.0.1:{port}\n"))
    server = await runtime.http.start()
    assert server.url == f"http://127.0.0.1:{port}"
    assert runtime.approvals.attending  # the dashboard attends while the server runs
    async with (
        aiohttp.ClientSession() as client,
        client.get(server.url + "/healthz") as response,
    ):
        assert response.status == 200
    await runtime.close()
    assert not runtime.approvals.attending
    async with aiohttp.ClientSession() as client:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.get(f"http://127.0.0.1:{port}/healthz")


def test_the_http_section_is_validated_strictly(home: Any) -> None:
    cases = {
        "http:\n  listen: nowhere\n": "is not HOST:PORT",
        "http:\n  listen: 127.0.0.1:99999\n": "out of range",
        "http:\n  bogus: 1\n": "unknown key",
        "http:\n  metrics: {public: maybe}\n": "true or false",
        "http:\n  hooks:\n    gh: {agent: ghost}\n": "agent 'ghost' is not defined",
        "http:\n  hooks:\n    gh: {prompt: 'x {{ .a | b }}'}\n": "not a field reference",
        "http:\n  hooks:\n    gh: {deliver: telegram:123}\n": "is not configured",
        "http:\n  hooks:\n    gh: {deliver: web}\n": "ACCOUNT:CONVERSATION",
    }
    for extra, message in cases.items():
        with pytest.raises(ConfigError, match=message) as caught:
            parse_config(mock_config(extra=extra), home.config_path, home)
        assert str(caught.value).startswith(f"{home.config_path}:"), extra
    ok = parse_config(
        mock_config(extra="http:\n  hooks:\n    gh: {deliver: 'web:ops', secret_env: GH}\n"),
        home.config_path,
        home,
    )
    assert ok.http is not None
    assert (ok.http.host, ok.http.port) == ("127.0.0.1", 8484)
    assert ok.http.hooks["gh"].name == "gh"


def test_a_channels_url_is_logged_without_what_follows_its_account() -> None:
    from habakkuk.server.app import loggable_path

    assert loggable_path("/channels/imsg/s3cret-in-the-url") == "/channels/imsg/…"
    assert loggable_path("/channels/imsg") == "/channels/imsg"
    assert loggable_path("/api/sessions/ses_1") == "/api/sessions/ses_1"
