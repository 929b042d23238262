"""The JSON-RPC client of a signal-cli HTTP daemon (`POST /api/v1/rpc`).

Every request names `account`: a multi-account daemon (started without -a) picks the
account by it and answers -32602 for one it does not have; a single-account daemon
ignores it. Errors come back mapped to what the adapter's callers need
(signal_wire.mapped_error); the daemon's other answers (415, 421 for a Host header it is
not pinned to) are one line each.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, SendError
from .signal_wire import mapped_error, parse_error

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
MISDIRECTED = (
    "the daemon at {base} refused the Host header (421): use the address it listens on "
    "(its --http HOST:PORT) in base_url"
)


class SignalRpc:
    """One account's JSON-RPC calls to the daemon at `base_url` (one HTTP session)."""

    def __init__(self, base_url: str, number: str):
        self.base_url = base_url.rstrip("/")
        self.number = number
        self._ids = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None
        self._closed = False

    def session(self) -> aiohttp.ClientSession:
        """The HTTP session (opened on first use; SendError once closed)."""
        if self._closed:
            raise SendError(f"signal {self.number}: the adapter is closed")
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=15, sock_read=None)
            )
        return self._http

    async def close(self) -> None:
        """Close the HTTP session for good (idempotent; later calls raise SendError)."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def call(self, method: str, params: dict[str, Any], *, timeout: float = 60.0) -> Any:
        """Call a JSON-RPC method of the daemon; returns `result` or raises the mapped error."""
        body = await self.request(method, params, timeout=timeout)
        if "error" in body:
            raise mapped_error(method, parse_error(body["error"]), self.number)
        return body.get("result")

    async def request(
        self, method: str, params: dict[str, Any], *, timeout: float = 60.0
    ) -> dict[str, Any]:
        """One JSON-RPC request; the response object (with `result` or `error`)."""
        request = {
            "jsonrpc": "2.0",
            "method": method,
            "params": params | {"account": self.number},
            "id": next(self._ids),
        }
        try:
            async with self.session().post(
                f"{self.base_url}/api/v1/rpc",
                json=request,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                status = response.status
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{method}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        if status == 421:
            raise FatalAdapterError(MISDIRECTED.format(base=self.base_url))
        if status != 200:
            raise SendError(f"{method}: HTTP {status}")
        try:
            body = json.loads(text)
        except ValueError:
            raise SendError(f"{method}: the answer is not JSON") from None
        if not isinstance(body, dict):
            raise SendError(f"{method}: the answer is not a JSON-RPC response")
        return body
