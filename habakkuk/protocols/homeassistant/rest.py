"""Home Assistant's REST API: states, service calls and history, with a bearer token.

The address is the owner's (`homeassistant.url`), usually on the home network, so it
is not held to the SSRF guard's public-address rule; what the model supplies (domain,
service, entity ids) only ever fills path segments checked by rules.py, and redirects
are not followed, so the token goes nowhere but that address. Proxies from the
environment are ignored, as for every guarded request.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from habakkuk.engine.http_read import read_upto

if TYPE_CHECKING:
    from habakkuk.engine.home import Environment

TIMEOUT_SECONDS = 30.0
MAX_BYTES = 8_000_000
TOKEN_HELP = "a long-lived access token, made under your Home Assistant profile, Security"


class HaError(Exception):
    """A request Home Assistant refused or that failed: one line saying why."""


class HaAuthError(HaError):
    """Home Assistant refused the token (or none is set)."""


async def read_token(env: Environment | None, variable: str) -> str:
    """The access token from `variable` (environment, .env, secrets or the OS keyring);
    HaAuthError naming the variable when it is not set."""
    token = env.get(variable) if env is not None else None
    if not token:
        from habakkuk.engine.llm.keys import keyring_get

        token = await asyncio.to_thread(keyring_get, variable)
    if not token:
        raise HaAuthError(f"{variable} is not set: it must hold {TOKEN_HELP}")
    return token


@dataclass(frozen=True)
class HaClient:
    """Requests to one instance (`url`: its base address, without /api)."""

    url: str
    token: str
    token_env: str
    timeout: float = TIMEOUT_SECONDS

    async def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        """GET /api/<path>: the JSON answer, or HaError."""
        return await self._request("GET", path, params=params)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST /api/<path> with a JSON body: the JSON answer, or HaError."""
        return await self._request("POST", path, body=body)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        import aiohttp

        from habakkuk.tools.netguard import guarded_session

        url = f"{self.url}/api/{path}"
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        try:
            async with (
                guarded_session(allow_private=True, timeout=self.timeout) as http,
                http.request(
                    method,
                    url,
                    params=params,
                    json=body,
                    headers=headers,
                    allow_redirects=False,
                ) as response,
            ):
                raw = await read_upto(response.content, MAX_BYTES + 1)
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            why = str(exc) or type(exc).__name__
            raise HaError(f"cannot reach Home Assistant at {self.url}: {why}") from None
        if status == 401 or status == 403:
            raise HaAuthError(
                f"Home Assistant refused the token in {self.token_env} ({status}): "
                f"it must hold {TOKEN_HELP}"
            )
        if len(raw) > MAX_BYTES:
            raise HaError(f"Home Assistant's answer is over {MAX_BYTES:,} bytes")
        text = raw.decode("utf-8", errors="replace")
        if status >= 300:
            raise HaError(f"Home Assistant answered {status}: {_message(text)}")
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:
            raise HaError(f"Home Assistant's answer is not JSON: {text[:200]!r}") from None


def _message(text: str) -> str:
    """The message of an error answer ({"message": ...} or plain text), on one line."""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        text = parsed["message"]
    line = " ".join(text.split())
    return line[:300] or "(no message)"


def service_path(domain: str, service: str) -> str:
    """services/<domain>/<service> (both already checked by rules.build_call)."""
    return f"services/{quote(domain, safe='')}/{quote(service, safe='')}"


def history_path(start_iso: str) -> str:
    """history/period/<start>: the history from that moment."""
    return f"history/period/{quote(start_iso, safe='')}"
