"""A login as a credential: the token function the router calls before each attempt.

`LoginToken.token()` returns the stored token while it has more than five minutes
left. Otherwise it takes the process's asyncio lock, then auth.json.lock (another
process may be refreshing), re-reads the file (that process may have refreshed
already: then its token is used and nothing is sent), refreshes, and writes the file
atomically. A refresh the service refuses is an auth error naming `habakkuk auth
login KIND` (the router falls back down the chain); one that cannot reach the
service is a network error (the router retries).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from typing import Any

from habakkuk.engine.auth_store import LoginStore
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.i18n import t

from ..provider import ErrorClass, ProviderError
from .common import Clock, Service, Session, now
from .wire import LoginRefused, LoginUnreachable

log = logging.getLogger(__name__)

MARGIN = 300.0  # a token with less left than this is refreshed first
KEPT_SESSIONS = 4  # a call may still start with a token handed out before a refresh


class LoginToken:
    """The `auth: KIND` credential of one process: the token, refreshed when due."""

    def __init__(self, service: Service, store: LoginStore, clock: Clock = now):
        self.service = service
        self.store = store
        self.clock = clock
        self.kind = service.kind
        self._lock = asyncio.Lock()
        self._record: dict[str, Any] | None = None
        self._seen: tuple[int, int] | None = None  # auth.json's (mtime_ns, size) when read
        # The tokens handed out last, with their URL and headers, for the adapter.
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def _fresh(self, record: dict[str, Any] | None) -> bool:
        return record is not None and self.service.expires_at(record) - self.clock() > MARGIN

    def _stored(self) -> dict[str, Any] | None:
        """The login as auth.json has it, read again only when the file changed (a stat:
        another process's refresh, login or logout shows at the next call)."""
        try:
            info = os.stat(self.store.path)
            seen: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
        except FileNotFoundError:
            seen = None
        if seen != self._seen or seen is None:
            self._record = self.store.get(self.kind) if seen is not None else None
            self._seen = seen
        return self._record

    async def token(self) -> str:
        """The bearer token for the next call (ProviderError auth or network)."""
        try:
            return await self._token()
        except HabakkukError as exc:  # auth.json is not JSON: no login to use
            raise self._error("auth", str(exc)) from None

    async def _token(self) -> str:
        record = self._stored()
        if record is None:
            raise self._error("auth", t("auth.not_signed_in", language="en", kind=self.kind))
        if not self._fresh(record):
            record = await self._refreshed()
        session = self.service.session(record)
        self._sessions[session.token] = session
        self._sessions.move_to_end(session.token)
        while len(self._sessions) > KEPT_SESSIONS:
            self._sessions.popitem(last=False)
        return session.token

    async def _refreshed(self) -> dict[str, Any]:
        async with self._lock:  # one refresh per process...
            record = self._stored()
            if record is not None and self._fresh(record):
                return record  # another task of this process refreshed meanwhile
            async with self.store.locked():  # ...and one across processes
                record = await asyncio.to_thread(self.store.get, self.kind)
                if record is None:
                    message = t("auth.not_signed_in", language="en", kind=self.kind)
                    raise self._error("auth", message)
                if not self._fresh(record):
                    try:
                        record = await self.service.refresh(record)
                    except LoginRefused as exc:
                        raise self._error("auth", str(exc)) from None
                    except LoginUnreachable as exc:
                        raise self._error("network", str(exc)) from None
                    await asyncio.to_thread(self.store.put, self.kind, record)
                    log.info("refreshed the %s login", self.kind)
                self._record, self._seen = record, None  # re-stat next time
            return record

    def _error(self, error_class: ErrorClass, message: str) -> ProviderError:
        return ProviderError(error_class, message)

    def session_for(self, token: str | None) -> Session | None:
        """The session of `token`, one of those handed out last (None: not one of them)."""
        return self._sessions.get(token) if token else None
