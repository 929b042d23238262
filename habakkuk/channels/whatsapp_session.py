"""Connecting a WhatsApp linked device: its events as one queue, linking with a QR code.

The library calls a handler per event type on our event loop; `EventQueue` registers one
for each event the adapter and `habakkuk whatsapp link` care about and turns them into
typed `Happening`s on one asyncio queue, so each consumer is a plain loop that reads the
queue. `connect_device` is that loop up to "connected": it returns who we are, shows the
pairing QR codes when asked to link (they rotate every 20 seconds or so), and otherwise
refuses a device that is not linked, naming the command that links it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .adapter import FatalAdapterError
from .whatsapp_client import ClientFactory, WhatsAppClient
from .whatsapp_parse import Me

if TYPE_CHECKING:
    from neonize.proto.Neonize_pb2 import Message as MessageEv

Kind = Literal["message", "connected", "disconnected", "fatal", "stale", "fresh", "qr", "ended"]


@dataclass(frozen=True)
class Happening:
    """One thing the connection did: a message, a state change, a QR code to show."""

    kind: Kind
    message: MessageEv | None = None
    detail: str = ""


class EventQueue:
    """The library's events for one client, as Happenings on a queue (in their order)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Happening] = asyncio.Queue()
        self.watcher: asyncio.Task[None] | None = None

    def put(self, happening: Happening) -> None:
        self.queue.put_nowait(happening)

    async def get(self) -> Happening:
        return await self.queue.get()

    def register(self, client: WhatsAppClient) -> None:
        """Register a handler for each event we use (before `connect`: the Go core only
        reports the events a handler was registered for)."""
        from neonize.proto import Neonize_pb2 as ev

        put = self.put

        async def message(_: Any, event: MessageEv) -> None:
            put(Happening("message", event))

        async def connected(_: Any, event: ev.Connected) -> None:
            put(Happening("connected"))

        async def disconnected(_: Any, event: ev.Disconnected) -> None:
            put(Happening("disconnected", detail="the WhatsApp connection closed"))

        async def logged_out(_: Any, event: ev.LoggedOut) -> None:
            reason = ev.ConnectFailureReason.Name(event.Reason) if event.Reason else "logged out"
            put(Happening("fatal", detail=f"this device was unlinked ({reason.lower()})"))

        async def replaced(_: Any, event: ev.StreamReplaced) -> None:
            put(Happening("fatal", detail="another client took over this linked device"))

        async def banned(_: Any, event: ev.TemporaryBan) -> None:
            put(Happening("fatal", detail=f"WhatsApp banned this number for now ({event.Code})"))

        async def outdated(_: Any, event: ev.ClientOutdated) -> None:
            put(Happening("fatal", detail="WhatsApp calls this client outdated: update neonize"))

        async def failure(_: Any, event: ev.ConnectFailure) -> None:
            reason = ev.ConnectFailureReason.Name(event.Reason) if event.Reason else "failure"
            kind: Kind = "disconnected" if event.Reason in (1, 8, 10) else "fatal"
            put(Happening(kind, detail=f"connect failed: {reason.lower()} {event.Message}".strip()))

        async def stale(_: Any, event: ev.KeepAliveTimeout) -> None:
            put(Happening("stale", detail=f"{event.ErrorCount} keepalives unanswered"))

        async def fresh(_: Any, event: ev.KeepAliveRestored) -> None:
            put(Happening("fresh"))

        async def paired(_: Any, event: ev.PairStatus) -> None:
            if event.Error:
                put(Happening("fatal", detail=f"pairing failed: {event.Error}"))

        async def qr(_: Any, code: bytes) -> None:
            put(Happening("qr", detail=code.decode(errors="replace")))

        client.event(ev.Message)(message)
        client.event(ev.Connected)(connected)
        client.event(ev.Disconnected)(disconnected)
        client.event(ev.LoggedOut)(logged_out)
        client.event(ev.StreamReplaced)(replaced)
        client.event(ev.TemporaryBan)(banned)
        client.event(ev.ClientOutdated)(outdated)
        client.event(ev.ConnectFailure)(failure)
        client.event(ev.KeepAliveTimeout)(stale)
        client.event(ev.KeepAliveRestored)(fresh)
        client.event(ev.PairStatus)(paired)
        client.event.qr(qr)

    def watch(self, client: WhatsAppClient) -> None:
        """Report "ended" when the client's Go core stops (after `connect`)."""

        async def idle() -> None:
            detail = "the WhatsApp client stopped"
            try:
                await client.idle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                detail = f"the WhatsApp client stopped: {exc}"
            self.put(Happening("ended", detail=detail))

        self.watcher = asyncio.get_running_loop().create_task(idle(), name="whatsapp-idle")

    def close(self) -> None:
        """Stop watching (the client is being closed)."""
        if self.watcher is not None:
            self.watcher.cancel()


def render_qr(code: str) -> str:
    """A pairing code as a QR code drawn with half-block characters (two rows per line),
    dark on light, scannable from a terminal."""
    import segno

    out = io.StringIO()
    segno.make_qr(code, error="l").terminal(out=out, compact=True, border=2)
    return out.getvalue()


async def who(client: WhatsAppClient) -> Me:
    """Our own phone-number and LID users, from the device store."""
    device = await client.get_me()
    return Me(device.JID.User, device.LID.User)


def describe(me: Me) -> str:
    """How `habakkuk whatsapp link` and the setup check name the device."""
    return f"+{me.user}" if me.user else "(unknown number)"


async def connect_device(
    client: WhatsAppClient,
    events: EventQueue,
    *,
    account: str,
    show: Callable[[str], None] | None = None,
) -> Me:
    """Connect and wait until WhatsApp says we are in; return who we are.

    With `show`, an unlinked device shows each pairing QR code through it (scan it in
    WhatsApp: Settings > Linked devices > Link a device); without, an unlinked device is
    a FatalAdapterError naming `habakkuk whatsapp link`. A fatal event (unlinked,
    replaced, banned) is a FatalAdapterError; a dropped connection a ConnectionError.
    """
    events.register(client)
    await client.connect()
    events.watch(client)
    while True:
        happening = await events.get()
        if happening.kind == "connected":
            return await who(client)
        if happening.kind == "qr":
            if show is None:
                raise FatalAdapterError(
                    f"WhatsApp {account} is not linked: run `habakkuk whatsapp link "
                    f"--account {account}` and scan its QR code"
                )
            show(render_qr(happening.detail))
            show("Scan this in WhatsApp: Settings > Linked devices > Link a device.")
        elif happening.kind == "fatal":
            raise FatalAdapterError(f"WhatsApp {account}: {happening.detail}")
        elif happening.kind in ("disconnected", "ended"):
            raise ConnectionError(f"WhatsApp {account}: {happening.detail}")


async def close_client(client: WhatsAppClient) -> None:
    """Disconnect and stop the Go core (errors here change nothing: it is going away)."""
    with contextlib.suppress(Exception):
        await client.disconnect()
    with contextlib.suppress(Exception):
        await client.stop()


def device_path(channels_dir: Path, account: str) -> Path:
    """Where an account's device keys live: `channels/whatsapp-<account>.db`."""
    return channels_dir / f"whatsapp-{account}.db"


async def link_device(
    factory: ClientFactory,
    db_path: Path,
    account: str,
    show: Callable[[str], None],
    timeout: float = 300.0,
) -> str:
    """Link (or reconnect) the device at `db_path`, showing QR codes; who we are, as text."""
    from habakkuk.engine.home import ensure_private_dir

    ensure_private_dir(db_path.parent)
    client = factory(db_path)
    events = EventQueue()
    try:
        async with asyncio.timeout(timeout):
            me = await connect_device(client, events, account=account, show=show)
    except TimeoutError:
        raise FatalAdapterError(
            f"WhatsApp {account}: not linked within {timeout:.0f}s (no QR code scanned)"
        ) from None
    finally:
        events.close()
        await close_client(client)
    return describe(me)
