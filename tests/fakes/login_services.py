"""Fakes of the sign-in and token endpoints of OpenAI (ChatGPT) and GitHub (Copilot).

One aiohttp app on 127.0.0.1 speaking the real request and response shapes:

OpenAI's auth server (the Codex CLI's device-code sign-in):
- POST /api/accounts/deviceauth/usercode {client_id} -> {device_auth_id, user_code,
  interval} (the interval a string, as the service sends it);
- POST /api/accounts/deviceauth/token {device_auth_id, user_code} -> 403 while the person
  has not approved, then {authorization_code, code_challenge, code_verifier};
- POST /oauth/token: grant_type=authorization_code (a form, with redirect_uri and
  code_verifier) or grant_type=refresh_token (JSON) -> {id_token, access_token,
  refresh_token, expires_in}; the id token a JWT with the
  https://api.openai.com/auth claim; a refresh token it does not take -> 401
  {"error": "invalid_grant", ...}. Every refresh issues new tokens (rotation).

GitHub (the device flow and Copilot's token exchange):
- POST /login/device/code (form client_id, scope) -> {device_code, user_code,
  verification_uri, expires_in, interval};
- POST /login/oauth/access_token (form, the device-code grant) -> 200 {"error":
  "authorization_pending"} until approved, then {access_token, token_type, scope};
- GET /api/user (Authorization: token ...) -> {login};
- GET /api/copilot_internal/v2/token (Authorization: token ...) -> {token, expires_at,
  refresh_in, endpoints: {api}}; 401 for a GitHub token it does not know.

`pending_polls` is how many OpenAI polls answer "not yet" before the code counts as
approved; `github_waits` the errors GitHub's polls answer first.
`refresh_hold`, when set, is awaited by the first refresh before it answers (a test
holds it until a second process waits on the lock).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.loopback import Threaded, serve_on_loopback

CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
COPILOT_CLIENT_ID = "Iv1.b507a08c87ecfe98"
ACCOUNT_ID = "acct-fake-123"
EMAIL = "ada@example.com"
GITHUB_USER = "octocat"


def jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT carrying `claims` (the client does not verify it)."""

    def part(value: dict[str, Any]) -> str:
        raw = json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2ln"


@dataclass
class Seen:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    form: bool  # sent as application/x-www-form-urlencoded


@dataclass
class FakeLoginServices:
    """The OpenAI auth server and GitHub, one app."""

    pending_polls: int = 1
    # GitHub's answers before the token (slow_down carries the new interval, as GitHub's
    # does); an expired_token or access_denied here ends the sign-in.
    github_waits: list[str] = field(default_factory=lambda: ["authorization_pending"])
    copilot_api: str = "https://api.githubcopilot.com"  # what endpoints.api names
    access_lifetime: int = 3600
    refused_refresh_tokens: set[str] = field(default_factory=set)
    refresh_hold: Callable[[], Awaitable[None]] | None = None
    requests: list[Seen] = field(default_factory=list)
    refresh_tokens: set[str] = field(default_factory=lambda: {"rt-0"})
    github_tokens: set[str] = field(default_factory=set)
    issued: int = 0
    _polls: int = 0
    _runner: web.AppRunner | None = None
    _port: int | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/accounts/deviceauth/usercode", self._usercode)
        app.router.add_post("/api/accounts/deviceauth/token", self._device_token)
        app.router.add_post("/oauth/token", self._oauth_token)
        app.router.add_post("/login/device/code", self._github_device)
        app.router.add_post("/login/oauth/access_token", self._github_token)
        app.router.add_get("/api/user", self._github_user)
        app.router.add_get("/api/copilot_internal/v2/token", self._copilot_token)
        self._runner, self._port = await serve_on_loopback(app)

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    @property
    def base_url(self) -> str:
        assert self._port is not None, "start() first"
        return f"http://127.0.0.1:{self._port}"

    @property
    def refreshes(self) -> list[Seen]:
        """The refresh-token grants received."""
        return [
            r
            for r in self.requests
            if r.path == "/oauth/token" and r.body.get("grant_type") == "refresh_token"
        ]

    @property
    def exchanges(self) -> list[Seen]:
        """The Copilot token exchanges received."""
        return [r for r in self.requests if r.path == "/api/copilot_internal/v2/token"]

    async def _seen(self, request: web.Request) -> Seen:
        form = request.content_type == "application/x-www-form-urlencoded"
        body: dict[str, Any] = {}
        if request.can_read_body:
            if form:
                body = dict((await request.post()).items())
            else:
                body = await request.json()
        seen = Seen(request.method, request.path, dict(request.headers), body, form)
        self.requests.append(seen)
        return seen

    # -- OpenAI --

    async def _usercode(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if seen.body.get("client_id") != CODEX_CLIENT_ID:
            return web.json_response({"error": "invalid_client"}, status=400)
        return web.json_response(
            {"device_auth_id": "deviceauth_1", "user_code": "ABCD-1234", "interval": "0"}
        )

    async def _device_token(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if seen.body != {"device_auth_id": "deviceauth_1", "user_code": "ABCD-1234"}:
            return web.json_response({"error": "bad request"}, status=400)
        self._polls += 1
        if self._polls <= self.pending_polls:
            return web.json_response(
                {"error": {"message": "Device authorization is pending", "code": "pending"}},
                status=403,
            )
        return web.json_response(
            {
                "authorization_code": "ac_device_1",
                "code_challenge": "challenge",
                "code_verifier": "verifier_1",
            }
        )

    def _tokens(self) -> dict[str, Any]:
        self.issued += 1
        n = self.issued
        refresh = f"rt-{n}"
        self.refresh_tokens.add(refresh)
        claims = {
            "email": EMAIL,
            "https://api.openai.com/auth": {
                "chatgpt_account_id": ACCOUNT_ID,
                "chatgpt_plan_type": "plus",
            },
        }
        return {
            "id_token": jwt(claims),
            "access_token": f"at-{n}",
            "refresh_token": refresh,
            "expires_in": self.access_lifetime,
            "token_type": "Bearer",
        }

    async def _oauth_token(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        grant = seen.body.get("grant_type")
        if grant == "authorization_code":
            expected = {
                "grant_type": "authorization_code",
                "code": "ac_device_1",
                "redirect_uri": f"{self.base_url}/deviceauth/callback",
                "client_id": CODEX_CLIENT_ID,
                "code_verifier": "verifier_1",
            }
            if not seen.form or seen.body != expected:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return web.json_response(self._tokens())
        if grant == "refresh_token":
            if len(self.refreshes) == 1 and self.refresh_hold is not None:
                await self.refresh_hold()
            token = seen.body.get("refresh_token")
            if (
                seen.body.get("client_id") != CODEX_CLIENT_ID
                or token in self.refused_refresh_tokens
                or token not in self.refresh_tokens
            ):
                return web.json_response(
                    {
                        "error": "invalid_grant",
                        "error_description": "The refresh token is invalid or expired.",
                    },
                    status=401,
                )
            self.refresh_tokens.discard(str(token))  # single use, as the service rotates
            return web.json_response(self._tokens())
        return web.json_response({"error": "unsupported_grant_type"}, status=400)

    # -- GitHub --

    async def _github_device(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if seen.body.get("client_id") != COPILOT_CLIENT_ID or seen.body.get("scope") != "read:user":
            return web.json_response({"error": "unauthorized_client"}, status=400)
        return web.json_response(
            {
                "device_code": "dc_1",
                "user_code": "WXYZ-5678",
                "verification_uri": "https://github.com/login/device",
                "expires_in": 900,
                "interval": 0,
            }
        )

    async def _github_token(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if seen.body != {
            "client_id": COPILOT_CLIENT_ID,
            "device_code": "dc_1",
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        }:
            return web.json_response({"error": "incorrect_device_code"})
        if self.github_waits:
            error = self.github_waits.pop(0)
            answer: dict[str, Any] = {"error": error, "error_description": f"({error})"}
            if error == "slow_down":
                answer["interval"] = 0
            return web.json_response(answer)
        self.github_tokens.add("gho_fake_1")
        return web.json_response(
            {"access_token": "gho_fake_1", "token_type": "bearer", "scope": "read:user"}
        )

    def _github_auth(self, seen: Seen) -> bool:
        scheme, _, token = seen.headers.get("Authorization", "").partition(" ")
        return scheme == "token" and token in self.github_tokens

    async def _github_user(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if not self._github_auth(seen):
            return web.json_response({"message": "Bad credentials"}, status=401)
        return web.json_response({"login": GITHUB_USER, "id": 1})

    async def _copilot_token(self, request: web.Request) -> web.Response:
        seen = await self._seen(request)
        if not self._github_auth(seen):
            return web.json_response({"message": "Bad credentials"}, status=401)
        self.issued += 1
        expires = int(time.time()) + 1800
        return web.json_response(
            {
                "token": f"tid=fake;exp={expires};n={self.issued}",
                "expires_at": expires,
                "refresh_in": 1500,
                "endpoints": {"api": self.copilot_api},
            }
        )


class ThreadedLogins(Threaded[FakeLoginServices]):
    """The fake on its own loop in a thread (for the synchronous CLI)."""

    def __init__(self, fake: FakeLoginServices | None = None) -> None:
        super().__init__(fake or FakeLoginServices())
