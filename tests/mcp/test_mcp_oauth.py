"""MCP OAuth sign-in against a fake authorization server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import itertools
import json
import os
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession, web

from habakkuk.cli import main
from habakkuk.engine.auth_store import LoginStore
from habakkuk.engine.config import McpServerConfig, parse_config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.protocols.mcp.manager import McpManager
from habakkuk.protocols.mcp.oauth import (
    LoginRequired,
    OAuthError,
    login,
)
from habakkuk.protocols.mcp.oauth_auth import OAuthHandler
from tests.fakes.loopback import serve_on_loopback

BOUND = 60.0


class FakeAuthServer:
    """A protected MCP resource (/mcp) and its authorization server (/tenant)."""

    def __init__(self) -> None:
        self.base = ""
        self.clients: dict[str, dict[str, Any]] = {}
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: set[str] = set()
        self.refresh: dict[str, str] = {}  # refresh token -> client id
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.device_polls = 0
        self.wrong_iss = False
        self.counter = itertools.count(1)

    @property
    def issuer(self) -> str:
        return f"{self.base}/tenant"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self.resource)
        app.router.add_get("/.well-known/oauth-protected-resource/mcp", self.prm)
        app.router.add_get("/.well-known/oauth-authorization-server/tenant", self.asm)
        app.router.add_post("/tenant/register", self.register)
        app.router.add_get("/tenant/authorize", self.authorize)
        app.router.add_post("/tenant/token", self.token)
        app.router.add_post("/tenant/device", self.device)
        return app

    async def resource(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in self.access:
            return web.json_response({"ok": True, "token": auth[7:]})
        challenge = (
            f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp",'
            ' scope="files:read"'
        )
        return web.Response(status=401, headers={"WWW-Authenticate": challenge})

    async def prm(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"resource": f"{self.base}/mcp", "authorization_servers": [self.issuer]}
        )

    async def asm(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "registration_endpoint": f"{self.issuer}/register",
                "device_authorization_endpoint": f"{self.issuer}/device",
                "scopes_supported": ["files:read", "offline_access"],
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def register(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.seen.append(("register", {k: json.dumps(v) for k, v in body.items()}))
        assert body["token_endpoint_auth_method"] == "none"
        client_id = f"client-{next(self.counter)}"
        self.clients[client_id] = body
        return web.json_response(dict(body, client_id=client_id), status=201)

    async def authorize(self, request: web.Request) -> web.Response:
        q = dict(request.query)
        self.seen.append(("authorize", q))
        client = self.clients[q["client_id"]]
        assert q["redirect_uri"] in client["redirect_uris"]
        assert q["code_challenge_method"] == "S256" and q["resource"] == f"{self.base}/mcp"
        code = f"code-{next(self.counter)}"
        self.codes[code] = q
        iss = "https://evil.example" if self.wrong_iss else self.issuer
        query = urllib.parse.urlencode({"code": code, "state": q["state"], "iss": iss})
        raise web.HTTPFound(f"{q['redirect_uri']}?{query}")

    def _issue(self, client_id: str) -> web.Response:
        n = next(self.counter)
        access, refresh = f"at-{n}", f"rt-{n}"
        self.access.add(access)
        self.refresh[refresh] = client_id
        return web.json_response(
            {
                "access_token": access,
                "token_type": "bearer",
                "expires_in": 3600,
                "refresh_token": refresh,
                "scope": "files:read offline_access",
            }
        )

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.seen.append(("token", {k: str(v) for k, v in form.items()}))
        if form.get("resource") != f"{self.base}/mcp":
            return web.json_response({"error": "invalid_target"}, status=400)
        grant = form.get("grant_type")
        if grant == "authorization_code":
            q = self.codes.pop(str(form["code"]))
            digest = hashlib.sha256(str(form["code_verifier"]).encode()).digest()
            challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            if challenge != q["code_challenge"] or form["redirect_uri"] != q["redirect_uri"]:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return self._issue(str(form["client_id"]))
        if grant == "refresh_token":
            client = self.refresh.pop(str(form["refresh_token"]), None)
            if client is None:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return self._issue(client)
        if grant == "urn:ietf:params:oauth:grant-type:device_code":
            self.device_polls += 1
            if self.device_polls == 1:
                return web.json_response({"error": "authorization_pending"}, status=400)
            return self._issue(str(form["client_id"]))
        return web.json_response({"error": "unsupported_grant_type"}, status=400)

    async def device(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.seen.append(("device", {k: str(v) for k, v in form.items()}))
        return web.json_response(
            {
                "device_code": "dev-1",
                "user_code": "WDJB-MJHT",
                "verification_uri": f"{self.issuer}/activate",
                "interval": 0,
                "expires_in": 60,
            }
        )

    def revoke_access(self) -> None:
        self.access.clear()

    def revoke_everything(self) -> None:
        self.access.clear()
        self.refresh.clear()


@pytest.fixture
async def fake() -> AsyncIterator[FakeAuthServer]:
    server = FakeAuthServer()
    runner, port = await serve_on_loopback(server.app())
    server.base = f"http://127.0.0.1:{port}"
    yield server
    await runner.cleanup()


def server_config(home: Home, fake: FakeAuthServer, extra: str = "") -> McpServerConfig:
    text = (
        "providers: {mock: {type: mock}}\nagents: {main: {model: mock/x}}\n"
        f"mcp_servers:\n  files:\n    url: {fake.base}/mcp\n    auth: oauth\n{extra}"
    )
    home.config_path.write_text(text, encoding="utf-8")
    return parse_config(text, home.config_path, home).mcp_servers["files"]


async def browser(url: str) -> None:
    """Plays the user's browser: follow the sign-in page's redirect to the loopback."""
    async with ClientSession() as session, session.get(url) as response:
        assert response.status == 200, await response.text()


async def test_code_flow_with_pkce_registration_and_resource_indicator(
    home: Home, fake: FakeAuthServer
) -> None:
    server = server_config(home, fake)
    out = io.StringIO()
    record = await asyncio.wait_for(
        login(home, server, Environment(), open_url=browser, out=out), BOUND
    )
    assert "Sign in to files here" in out.getvalue()
    assert record["access_token"] in fake.access
    stored = LoginStore(home.root).get("mcp:files")
    assert stored is not None and stored["refresh_token"] == record["refresh_token"]
    assert stored["token_endpoint"] == f"{fake.issuer}/token"
    assert stored["resource"] == f"{fake.base}/mcp"
    assert oct((home.root / "auth.json").stat().st_mode & 0o777) == "0o600"
    kinds = [kind for kind, _ in fake.seen]
    assert kinds == ["register", "authorize", "token"]
    authorize = fake.seen[1][1]
    # the challenge's scope, plus offline_access because the server offers it
    assert authorize["scope"] == "files:read offline_access"
    assert authorize["redirect_uri"].startswith("http://127.0.0.1:")
    assert json.loads(fake.seen[0][1]["application_type"]) == "native"


async def test_a_wrong_issuer_in_the_answer_is_refused(home: Home, fake: FakeAuthServer) -> None:
    fake.wrong_iss = True
    server = server_config(home, fake)
    with pytest.raises(OAuthError, match="iss"):
        await asyncio.wait_for(
            login(home, server, Environment(), open_url=browser, out=io.StringIO()), BOUND
        )
    assert LoginStore(home.root).get("mcp:files") is None


async def test_device_flow_polls_until_approved(home: Home, fake: FakeAuthServer) -> None:
    server = server_config(home, fake, "    scopes: [files:read]\n")
    out = io.StringIO()
    record = await asyncio.wait_for(login(home, server, Environment(), device=True, out=out), BOUND)
    assert "WDJB-MJHT" in out.getvalue()
    assert fake.device_polls == 2 and record["access_token"] in fake.access
    device_request = next(params for kind, params in fake.seen if kind == "device")
    assert device_request["scope"] == "files:read offline_access"
    assert device_request["resource"] == f"{fake.base}/mcp"


async def test_handler_refreshes_a_refused_token_once_then_names_the_login(
    home: Home, fake: FakeAuthServer
) -> None:
    import httpx2

    server = server_config(home, fake)
    first = await asyncio.wait_for(
        login(home, server, Environment(), open_url=browser, out=io.StringIO()), BOUND
    )
    fake.revoke_access()
    handler = OAuthHandler(home, server, Environment())
    async with httpx2.AsyncClient(auth=handler) as client:
        response = await client.post(f"{fake.base}/mcp", json={"x": 1})
        assert response.status_code == 200
        refreshed = response.json()["token"]
        assert refreshed != first["access_token"]
        stored = LoginStore(home.root).get("mcp:files")
        assert stored is not None and stored["access_token"] == refreshed

        # a second process sharing auth.json reads the refreshed token without refreshing
        other = OAuthHandler(home, server, Environment())
        assert await other.token() == refreshed

        fake.revoke_everything()
        handler._last_refresh = 0.0  # the refusal comes long after the last refresh
        with pytest.raises(LoginRequired, match="habakkuk mcp login files"):
            await client.post(f"{fake.base}/mcp", json={"x": 2})


async def test_without_a_login_the_server_is_down_naming_the_command(
    home: Home, fake: FakeAuthServer
) -> None:
    server_config(home, fake)
    config = parse_config(home.config_path.read_text(), home.config_path, home)
    manager = McpManager(config, Environment(), home, ToolRegistry())
    try:
        await asyncio.wait_for(manager.start(BOUND), BOUND)
        link = manager.links["files"]
        assert link.state == "down"
        assert "habakkuk mcp login files" in (link.error or "")
    finally:
        await manager.close()


def test_logout_forgets_the_login(
    home: Home, fake: FakeAuthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server_config(home, fake)
    store = LoginStore(home.root)
    with store.held():
        store.put("mcp:files", {"access_token": "x"})
        store.put("subscription:other", {"token": "keep"})
    assert main(["mcp", "logout", "files"]) == 0
    assert "signed out of files" in capsys.readouterr().out
    assert store.get("mcp:files") is None and store.get("subscription:other") is not None
    assert main(["mcp", "login", "nothing"]) == 2
    assert "not configured" in capsys.readouterr().err
    assert os.stat(home.root / "auth.json").st_mode & 0o777 == 0o600


def test_doctor_findings_name_missing_secrets_programs_and_logins(
    home: Home, fake: FakeAuthServer
) -> None:
    from habakkuk.protocols.mcp.checks import mcp_findings

    text = (
        "providers: {mock: {type: mock}}\nagents: {main: {model: mock/x}}\n"
        "mcp_servers:\n"
        f"  files:\n    url: {fake.base}/mcp\n    auth: oauth\n"
        "  gh:\n    command: /nonexistent/gh-mcp\n    env: {TOKEN: GH_TOKEN_UNSET}\n"
        "  ok:\n    url: https://example.com/mcp\n"
    )
    config = parse_config(text, home.config_path, home)
    lines = [f.line() for f in mcp_findings(config, Environment(), home)]
    assert any("files" in line and "habakkuk mcp login files" in line for line in lines)
    assert any("GH_TOKEN_UNSET" in line and line.startswith("FAIL") for line in lines)
    assert any("/nonexistent/gh-mcp" in line for line in lines)
    assert "OK   mcp_servers.ok: configured" in lines


async def test_a_stop_while_the_browser_opener_runs_still_stops_the_login() -> None:
    from habakkuk.protocols.mcp.oauth import _settle_browser

    browser: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    settling = asyncio.create_task(_settle_browser(browser))
    await asyncio.sleep(0)
    settling.cancel()
    with pytest.raises(asyncio.CancelledError):
        await settling
    assert browser.cancelled()
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    failed.set_exception(OSError("no browser here"))
    await _settle_browser(failed)  # the opener's own failure is not the login's
