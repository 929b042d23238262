"""GitHub Copilot: GitHub's device flow, and a Copilot API token exchanged on demand.

Sign-in (RFC 8628 as GitHub runs it): POST {github}/login/device/code with the
Copilot editors' public client id and scope read:user gives a user code and the page
to enter it at; POST {github}/login/oauth/access_token with the device-code grant is
polled, answering authorization_pending, slow_down (wait longer), expired_token or
access_denied until it gives the GitHub token. That token is the long-lived
credential; a Copilot API token (about 30 minutes, `expires_at`) is exchanged from it
at GET {api}/copilot_internal/v2/token (Authorization: token <github token>), and
calls go to the endpoint that answer names (endpoints.api) with the editor headers
Copilot expects. For GitHub Enterprise, base_url is the server and api_url its
/api/v3.
"""

from __future__ import annotations

from typing import Any

from .common import Described, DeviceCode, Session, Sleep, now, number
from .wire import LoginRefused, LoginUnreachable, call

CLIENT_ID = "Iv1.b507a08c87ecfe98"  # the Copilot editor plugins' public client
GITHUB = "https://github.com"
GITHUB_API = "https://api.github.com"
COPILOT_API = "https://api.githubcopilot.com"
SCOPE = "read:user"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
SLOW_DOWN_STEP = 5.0  # RFC 8628: add five seconds on slow_down
# What Copilot's API expects of a client (the editor it is built for).
EDITOR_HEADERS = {
    "Editor-Version": "vscode/1.99.0",
    "Editor-Plugin-Version": "copilot-chat/0.26.7",
    "Copilot-Integration-Id": "vscode-chat",
    "User-Agent": "GitHubCopilotChat/0.26.7",
}
CALL_HEADERS = {**EDITOR_HEADERS, "Openai-Intent": "conversation-panel"}


def api_url_of(base_url: str) -> str:
    """The REST API of a GitHub server: api.github.com, else the server's /api/v3."""
    root = base_url.rstrip("/")
    return GITHUB_API if root == GITHUB else f"{root}/api/v3"


class Copilot:
    """The `copilot` login."""

    kind = "copilot"

    def __init__(
        self, base_url: str = GITHUB, api_url: str | None = None, client_id: str = CLIENT_ID
    ):
        self.github = base_url.rstrip("/")
        self.api = (api_url or api_url_of(base_url)).rstrip("/")
        self.client_id = client_id

    async def start(self) -> DeviceCode:
        """Ask GitHub for a device code."""
        url = f"{self.github}/login/device/code"
        reply = await call("POST", url, form={"client_id": self.client_id, "scope": SCOPE})
        device_code = reply.field("device_code")
        user_code = reply.field("user_code")
        if not reply.ok or not device_code or not user_code:
            raise LoginRefused.said("auth.bad_answer", url=url, status=reply.status)
        return DeviceCode(
            user_code=user_code,
            url=reply.field("verification_uri") or f"{self.github}/login/device",
            poll_id=device_code,
            interval=max(0.0, number(reply.data.get("interval"), 5.0)),
            deadline=now() + number(reply.data.get("expires_in"), 900.0),
        )

    async def finish(self, code: DeviceCode, sleep: Sleep) -> dict[str, Any]:
        """Poll for the GitHub token, then check Copilot access with a first exchange."""
        url = f"{self.github}/login/oauth/access_token"
        form = {
            "client_id": self.client_id,
            "device_code": code.poll_id,
            "grant_type": DEVICE_GRANT,
        }
        interval = code.interval
        while True:
            reply = await call("POST", url, form=form)
            token = reply.field("access_token")
            if reply.ok and token:
                break
            error = reply.field("error")
            if error == "slow_down":
                interval = number(reply.data.get("interval"), interval + SLOW_DOWN_STEP)
            elif error == "expired_token" or (
                error == "authorization_pending" and now() >= code.deadline
            ):
                raise LoginRefused.said("auth.sign_in_expired", kind=self.kind)
            elif error == "access_denied":
                raise LoginRefused.said("auth.access_denied", kind=self.kind)
            elif error != "authorization_pending":
                raise LoginRefused.said("auth.bad_answer", url=url, status=reply.status)
            await sleep(interval)
        record: dict[str, Any] = {"github_token": token, "signed_in_at": now()}
        user = await call("GET", f"{self.api}/user", headers=self._github_headers(token))
        if user.ok and user.field("login"):
            record["user"] = user.field("login")
        return await self.refresh(record)

    def _github_headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"token {token}", **EDITOR_HEADERS}

    async def refresh(self, record: dict[str, Any]) -> dict[str, Any]:
        """A new Copilot token from the GitHub token."""
        github_token = record.get("github_token")
        if not isinstance(github_token, str) or not github_token:
            raise LoginRefused.said("auth.login_again", kind=self.kind)
        url = f"{self.api}/copilot_internal/v2/token"
        reply = await call("GET", url, headers=self._github_headers(github_token))
        if reply.status == 401:
            raise LoginRefused.said("auth.login_again", kind=self.kind)
        if reply.status in (403, 404):
            raise LoginRefused.said("auth.no_copilot", user=record.get("user") or "?")
        token = reply.field("token")
        if not reply.ok or not token:
            raise LoginUnreachable.said("auth.bad_answer", url=url, status=reply.status)
        fresh = dict(record)
        fresh["copilot_token"] = token
        expires = number(reply.data.get("expires_at"), 0.0)
        fresh["expires_at"] = expires if expires > 0 else now() + 25 * 60.0
        endpoints = reply.data.get("endpoints")
        api = endpoints.get("api") if isinstance(endpoints, dict) else None
        fresh["api_url"] = api if isinstance(api, str) and api else COPILOT_API
        fresh["refreshed_at"] = now()
        return fresh

    def expires_at(self, record: dict[str, Any]) -> float:
        """When the Copilot token expires (0 before the first exchange)."""
        if not record.get("copilot_token"):
            return 0.0
        return number(record.get("expires_at"), 0.0)

    def session(self, record: dict[str, Any]) -> Session:
        """The Copilot token to the endpoint it names, with the editor headers."""
        return Session(
            str(record.get("copilot_token", "")),
            str(record.get("api_url") or COPILOT_API),
            dict(CALL_HEADERS),
        )

    def describe(self, record: dict[str, Any]) -> Described:
        """The GitHub user and the endpoint."""
        return Described(
            str(record.get("user") or ""), self.expires_at(record), str(record.get("api_url", ""))
        )
