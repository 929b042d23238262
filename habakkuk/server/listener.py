"""The HTTP listener's lifecycle: start the server, hold its lease, stand by, stop.

What must run once per home holds a named lease in control.db: this process names
itself as the listener's holder while it serves, and a second process whose address
is taken stands by and takes over once it is free. While the server runs, someone
may attend (the dashboard answers approvals).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.config import HttpConfig, parse_listen
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.hostname import this_host
from habakkuk.engine.overview import HttpListener

if TYPE_CHECKING:
    from habakkuk.services.approvals import Attendance

    from .app import HttpServer
    from .host import ServerHost

# The lease (in control.db) naming the process that serves the home's HTTP listener.
HTTP_LEASE = "http"


def http_lease() -> str:
    """The listener's lease name: one per host, since each node on a shared database
    serves its own HTTP listener (HABAKKUK_HOSTNAME names the host)."""
    return f"{HTTP_LEASE}:{this_host()}"


HTTP_LEASE_SECONDS = 60.0


class LeaseStore(Protocol):
    """The named leases of control.db (channels.store.ChannelStore provides them)."""

    async def acquire_lease(self, name: str, owner: str, seconds: float) -> str | None:
        """Take or renew lease `name`; None when we hold it, else the holder."""
        ...

    async def release_lease(self, name: str, owner: str) -> None:
        """Give the lease up."""
        ...

    async def lease_holder(self, name: str) -> str | None:
        """Who holds lease `name`, if anyone."""
        ...


class Listener:
    """Serves the config's `http` section for one runtime (at most one server at a time)."""

    def __init__(
        self,
        host: ServerHost,
        *,
        leases: Callable[[], Awaitable[LeaseStore]],
        recorded_leases: Callable[[], Awaitable[LeaseStore | None]],
        attend: Callable[[], Attendance],
    ):
        self.host = host
        self._leases = leases  # creates control.db's lease table when missing
        self._recorded_leases = recorded_leases  # None when no process ever had the table
        self._attend = attend
        self.server: HttpServer | None = None
        self._attendance: Attendance | None = None
        self._standby: asyncio.Task[None] | None = None
        self._lease: asyncio.Task[None] | None = None

    async def start(self, listen: str | None = None) -> HttpServer:
        """Serve the config's `http` section (or `listen`, e.g. 127.0.0.1:0 in tests).

        Returns the running server (its `url` names the bound port). While it runs,
        the dashboard can answer approvals, so turns submitted as attended wait for it.
        """
        from .app import HttpServer

        if self.server is not None:
            return self.server
        config = self.host.config.http or HttpConfig()
        token = None
        if config.token_env:
            token = self.host.env.get(config.token_env)
            if not token:
                raise ConfigError(
                    f"http.token_env: the variable {config.token_env} is not set "
                    "(process environment or HOME/.env)"
                )
        address, port = (config.host, config.port)
        if listen is not None:
            try:
                address, port = parse_listen(listen)
            except ValueError as exc:
                raise ConfigError(f"http listen address: {exc}") from None
        server = HttpServer(self.host, config, token)
        await server.start(address, port)
        self.server = server
        self._lease = asyncio.create_task(self._hold_lease(), name="http-lease")
        self._attendance = self._attend()
        return server

    async def serve(self, report: Callable[[str], None], *, retry_seconds: float = 5.0) -> None:
        """Serve the config's `http` section; when another process holds the address
        (a `--serve` beside this terminal), stand by and take over once it is free.

        Config errors (a missing token) raise at once; `report` gets one line for each
        change of state.
        """

        def announce(server: HttpServer) -> None:
            report(f"HTTP on {server.url} (dashboard {server.url}/app/)")

        try:
            announce(await self.start())
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        listen = self.host.config.http.listen if self.host.config.http else "the address"
        report(f"HTTP: {listen} is in use (another Habakkuk serving?); standing by")

        async def standby() -> None:
            while self.server is None:
                await asyncio.sleep(retry_seconds)
                try:
                    announce(await self.start())
                except OSError as exc:
                    if exc.errno != errno.EADDRINUSE:
                        report(f"HTTP server not started: {exc}")
                        return

        self._standby = asyncio.create_task(standby(), name="http-standby")

    async def _hold_lease(self) -> None:
        """Name this process as the HTTP listener's holder in control.db while it serves."""
        owner = f"pid {os.getpid()} on {this_host()}"
        store = await self._leases()
        try:
            while True:
                await store.acquire_lease(http_lease(), owner, HTTP_LEASE_SECONDS)
                await asyncio.sleep(HTTP_LEASE_SECONDS / 3)
        finally:
            with contextlib.suppress(Exception):  # closing: the lease runs out by itself
                await store.release_lease(http_lease(), owner)

    async def describe(self) -> HttpListener:
        """Who serves the config's HTTP listener: this process, another one, or nobody."""
        if self.server is not None:
            here = f"this process (pid {os.getpid()})"
            return HttpListener("serving", str(self.server.url), here)
        if self.host.config.http is None:
            return HttpListener("off", "", "")
        listen = self.host.config.http.listen
        store = await self._recorded_leases()
        holder = (await store.lease_holder(http_lease()) if store is not None else None) or ""
        standing_by = self._standby is not None and not self._standby.done()
        return HttpListener("stand-by" if standing_by else "elsewhere", listen, holder)

    async def stop(self) -> None:
        """Stop the HTTP server (and any standby) if it runs."""
        for task in (self._standby, self._lease):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._standby = self._lease = None
        if self.server is not None:
            server, self.server = self.server, None
            if self._attendance is not None:
                self._attendance.release()
                self._attendance = None
            await server.stop()
