"""A fake signal-cli daemon in HTTP mode on 127.0.0.1, speaking its real wire.

As `signal-cli daemon --http` (man page signal-cli-jsonrpc(5), HttpServerHandler.java):

- ``POST /api/v1/rpc``: a JSON-RPC 2.0 request (Content-Type application/json, else 415),
  answered 200 with ``{"jsonrpc": "2.0", "result": ..., "id": ...}`` or an ``error`` with
  signal-cli's codes (-1 user error, -4 untrusted identity, -5 rate limit, -32601 method
  not implemented, -32602 invalid params), a failed send's per-recipient results in
  ``error.data.response``. Methods: version, listAccounts (multi-account daemons only),
  send (recipient or groupId, message, textStyle, quoteTimestamp/quoteAuthor,
  attachments as data URIs, editTimestamp, noUrgent), sendTyping, sendReaction,
  remoteDelete, getAttachment.
- ``GET /api/v1/events[?account=NUMBER]``: Server-Sent Events, one ``event:receive`` per
  envelope (data ``{"account": ..., "envelope": ...}``) and a ``:`` keepalive comment
  every `keepalive` seconds; 400 for an account the daemon does not have. Envelopes
  pushed while no stream is open wait until one opens (the daemon's
  ``--receive-mode on-connection``: Signal's server keeps them).
- ``GET /api/v1/check``: 200.

Tests script people (`message`, `attachment`), inspect what the bot did (`calls`,
`texts`, `sent`), make recipients fail (`unregistered`, `untrusted`, `rate_limit`),
hold sends mid-delivery (`hold_sends_after`), drop the open streams (`drop_streams`)
and the whole server (`stop` / `start` on the same port).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_NUMBER = "+4915100000001"
ALICE_UUID = "a11ce000-0000-4000-8000-000000000042"
ALICE_NUMBER = "+4917000000042"
BOT_UUID = "b0b00000-0000-4000-8000-000000000001"
GROUP_ID = "R3JvdXBJZEJhc2U2NEZvclRoZVRlc3RzUGFkZGVkPT0="
_STYLE = re.compile(r"(\d+):(\d+):(.+)")
_STYLES = {"NONE", "BOLD", "ITALIC", "SPOILER", "STRIKETHROUGH", "MONOSPACE"}
_DATA_URI = re.compile(
    r"\Adata:(?P<type>.+?/.+?)?(?P<parameters>;.+?=.+?)?(?P<base64>;base64)?,(?P<data>.+)\Z",
    re.IGNORECASE | re.DOTALL,
)


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    answered: bool = True


@dataclass
class SentFile:
    name: str
    content_type: str
    data: bytes


@dataclass
class Sent:
    """A message the bot sent, as the recipient sees it now."""

    timestamp: int
    chat: str
    text: str
    styles: list[str]
    quote: tuple[int, str] | None = None
    files: list[SentFile] = field(default_factory=list)
    edits: int = 0
    deleted: bool = False
    urgent: bool = True


class FakeSignal:
    """The fake daemon. Use as `async with FakeSignal() as signal:`."""

    def __init__(
        self,
        accounts: tuple[str, ...] = (BOT_NUMBER,),
        *,
        single_account: bool = False,
        keepalive: float = 15.0,
        port: int = 0,
    ):
        self.accounts = accounts
        self.single_account = single_account
        self.keepalive = keepalive
        self.port = port
        self.calls: list[Call] = []
        self.sent: dict[int, Sent] = {}
        self.attachments: dict[str, tuple[str, str | None, bytes]] = {}
        self.unregistered: set[str] = set()
        self.untrusted: set[str] = set()
        self.rate_limited = 0  # the next N sends answer -5
        self.refused_files = ""  # why every send with an attachment is refused
        self.pending: list[str] = []  # events waiting for a stream
        self.streams: list[asyncio.Queue[str | None]] = []
        self.connections = 0  # event streams opened so far
        self._clock = int(time.time() * 1000)
        self._attachment_ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._hold_after: int | None = None
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/api/v1/rpc", self._rpc)
        app.router.add_get("/api/v1/events", self._events)
        app.router.add_get("/api/v1/check", self._check)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Take the daemon down (open streams are cut off)."""
        self.drop_streams()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def drop_streams(self) -> None:
        """End every open event stream; the daemon stays up."""
        for stream in self.streams:
            stream.put_nowait(None)

    async def __aenter__(self) -> FakeSignal:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        await self.stop()

    def now(self) -> int:
        """A fresh, unique millisecond timestamp (Signal's message ids)."""
        self._clock = max(self._clock + 1, int(time.time() * 1000))
        return self._clock

    # -- scripting people ----------------------------------------------------------------

    def push(self, envelope: dict[str, Any], account: str = BOT_NUMBER) -> None:
        """Deliver an envelope (again, for a replay) to the open streams, else keep it."""
        self.push_data(json.dumps({"account": account, "envelope": envelope}))

    def push_data(self, data: str) -> None:
        """Deliver one `receive` event's data as it is (one line)."""
        if self.streams:
            for stream in self.streams:
                stream.put_nowait(data)
        else:
            self.pending.append(data)

    def message(
        self,
        text: str = "",
        *,
        uuid: str | None = ALICE_UUID,
        number: str | None = ALICE_NUMBER,
        name: str = "Alice",
        group: str | None = None,
        mentions: list[dict[str, Any]] | None = None,
        quote: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A person sends a message (to the bot, or to `group`); returns the envelope."""
        stamp = self.now()
        data: dict[str, Any] = {
            "timestamp": stamp,
            "message": text or None,
            "expiresInSeconds": 0,
            "viewOnce": False,
            **extra,
        }
        if group:
            data["groupInfo"] = {
                "groupId": group,
                "groupName": "Test group",
                "revision": 1,
                "type": "DELIVER",
            }
        if mentions:
            data["mentions"] = mentions
        if quote:
            data["quote"] = quote
        if attachments:
            data["attachments"] = attachments
        envelope = {
            "source": number or uuid,
            "sourceNumber": number,
            "sourceUuid": uuid,
            "sourceName": name,
            "sourceDevice": 1,
            "timestamp": stamp,
            "serverReceivedTimestamp": stamp + 5,
            "serverDeliveredTimestamp": stamp + 9,
            "dataMessage": data,
        }
        self.push(envelope)
        return envelope

    def other(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        """An envelope that is not a data message (typingMessage, receiptMessage,
        syncMessage) from Alice."""
        stamp = self.now()
        envelope = {
            "source": ALICE_NUMBER,
            "sourceNumber": ALICE_NUMBER,
            "sourceUuid": ALICE_UUID,
            "sourceName": "Alice",
            "sourceDevice": 1,
            "timestamp": stamp,
            "serverReceivedTimestamp": stamp,
            "serverDeliveredTimestamp": stamp,
            kind: body,
        }
        self.push(envelope)
        return envelope

    def attachment(
        self, data: bytes, content_type: str, filename: str | None = None
    ) -> dict[str, Any]:
        """A file signal-cli has downloaded; returns its JSON for a message's attachments."""
        ident = f"att{next(self._attachment_ids)}.bin"
        self.attachments[ident] = (content_type, filename, data)
        return {
            "contentType": content_type,
            "filename": filename,
            "id": ident,
            "size": len(data),
            "width": None,
            "height": None,
            "caption": None,
            "uploadTimestamp": self.now(),
        }

    def hold_sends_after(self, count: int | None) -> None:
        """`send` calls after the first `count` hang until `release_sends`, then fail."""
        self._hold_after = count
        self._release.clear()

    def release_sends(self) -> None:
        self._hold_after = None
        self._release.set()

    # -- inspecting ----------------------------------------------------------------------

    def of(self, method: str, *, answered: bool | None = True) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.method == method and (answered is None or c.answered == answered)
        ]

    def messages(self, chat: str = ALICE_UUID) -> list[Sent]:
        """What the bot sent to a chat and the daemon accepted, oldest first (edits
        applied, remote deletes kept, marked)."""
        return [m for m in self.sent.values() if m.chat == chat]

    def texts(self, chat: str = ALICE_UUID) -> list[str]:
        """The texts of the bot's messages to a chat still there, oldest first."""
        return [m.text for m in self.messages(chat) if not m.deleted and m.text]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        """Wait until `predicate()` holds (checked after every request), at most `timeout`."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- the HTTP endpoints --------------------------------------------------------------

    async def _check(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        account = request.query.get("account")
        if account and not self.single_account and account not in self.accounts:
            return web.Response(status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        for waiting in self.pending:
            queue.put_nowait(waiting)
        self.pending.clear()
        self.streams.append(queue)
        self.connections += 1
        await self._notify()
        try:
            while True:
                try:
                    data = await asyncio.wait_for(queue.get(), self.keepalive)
                except TimeoutError:
                    await response.write(b":\n")
                    continue
                if data is None:
                    break
                await response.write(f"event:receive\ndata:{data}\n\n".encode())
        except ConnectionResetError:
            pass  # the client went away
        finally:
            self.streams.remove(queue)
            # Envelopes still queued were pushed to a stream that is gone: the daemon
            # had acknowledged them; they are lost, as with the real one.
        return response

    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        if not request.content_type.startswith("application/json"):
            return web.Response(status=415)
        body = await request.json()
        ident = body.get("id")
        method = str(body.get("method", ""))
        params = dict(body.get("params") or {})
        call = Call(method, params, answered=False)
        self.calls.append(call)
        await self._notify()
        try:
            answer = await self._answer(method, dict(params))
        finally:
            await self._notify()
        call.answered = "result" in answer
        await self._notify()
        if answer.get("held"):
            return web.Response(status=502)
        return web.json_response({"jsonrpc": "2.0", **answer, "id": ident})

    async def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "listAccounts":
            if self.single_account:
                return _error(-32601, "Method not implemented")
            return {"result": [{"number": n} for n in self.accounts]}
        account = params.pop("account", None)
        if not self.single_account:
            if account is None and len(self.accounts) != 1 and method != "version":
                return _error(-32602, "Method requires valid account parameter")
            if account is not None and account not in self.accounts:
                return _error(-32602, "Specified account does not exist")
        if method == "version":  # a single- and a multi-account command alike
            return {"result": {"version": "0.13.99-fake"}}
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(-32601, "Method not implemented")
        result: dict[str, Any] = await handler(params)
        return result

    # -- the methods ---------------------------------------------------------------------

    def _chat(self, params: dict[str, Any]) -> str | dict[str, Any]:
        """The one chat a request names, or an error answer."""
        recipients = _listed(params.get("recipient"))
        groups = _listed(params.get("groupId"))
        if len(recipients) + len(groups) != 1:
            return _error(-1, "No recipients given")
        chat = str((recipients or groups)[0])
        if groups and chat != GROUP_ID:
            return _error(-1, f"Group not found: {chat}")
        if chat == ALICE_NUMBER:
            chat = ALICE_UUID  # one person, whichever of their ids names them
        return chat

    def _refused(self, chat: str) -> dict[str, Any] | None:
        if chat in self.unregistered:
            return _failed(-1, "Failed to send message", _results(chat, "UNREGISTERED_FAILURE"))
        if chat in self.untrusted:
            return _failed(
                -4,
                "Failed to send message due to untrusted identities",
                _results(chat, "IDENTITY_FAILURE"),
            )
        if self.rate_limited:
            self.rate_limited -= 1
            return _failed(
                -5,
                "Failed to send message due to rate limiting",
                _results(chat, "RATE_LIMIT_FAILURE", retryAfterSeconds=7),
            )
        return None

    async def _m_send(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        if isinstance(chat, dict):
            return chat
        refused = self._refused(chat)
        if refused is not None:
            return refused
        if self._hold_after is not None and len(self.of("send", answered=None)) > (
            self._hold_after
        ):
            # Held until released, then dropped: the chat never got this message (the
            # bot was killed while waiting for the answer).
            await self._release.wait()
            return {"held": True}
        text = str(params.get("message") or "")
        styles = [str(s) for s in _listed(params.get("textStyle"))]
        units = len(text.encode("utf-16-le")) // 2
        for style in styles:
            match = _STYLE.fullmatch(style)
            if match is None:
                return _error(
                    -1, f"Invalid textStyle syntax ({style}) expected 'start:length:STYLE'"
                )
            if match.group(3) not in _STYLES:
                return _error(-1, f"Invalid style: {match.group(3)}")
            if int(match.group(1)) + int(match.group(2)) > units:
                # signal-cli passes it on; Signal clients then show garbled styles
                return _error(-1, f"textStyle {style} is outside the {units}-unit text")
        files: list[SentFile] = []
        for uri in _listed(params.get("attachments") or params.get("attachment")):
            parsed = _data_uri(str(uri))
            if parsed is None:
                return _error(
                    -32603,
                    "Failed to send message: not a data URI (AttachmentInvalidException)",
                )
            files.append(parsed)
        if files and self.refused_files:
            return _error(
                -32603,
                f"Failed to send message: {self.refused_files} (AttachmentInvalidException)",
            )
        quote = None
        if params.get("quoteTimestamp") is not None:
            if not params.get("quoteAuthor"):
                return _error(-1, "Quote author parameter is missing")
            quote = (int(params["quoteTimestamp"]), str(params["quoteAuthor"]))
        edit = params.get("editTimestamp")
        if not text and not files and quote is None:
            return _error(
                -1,
                "Sending empty message is not allowed, either a message, attachment or "
                "sticker must be given.",
            )
        stamp = self.now()
        if edit is not None:
            target = self.sent.get(int(edit))
            if target is not None and target.chat == chat:
                target.text, target.styles = text, styles
                target.edits += 1
        else:
            self.sent[stamp] = Sent(
                stamp, chat, text, styles, quote, files, urgent=not params.get("noUrgent")
            )
        return {"result": {"timestamp": stamp, "results": _results(chat, "SUCCESS")}}

    async def _m_sendTyping(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        if isinstance(chat, dict):
            return chat
        return {"result": {"timestamp": self.now(), "results": []}}

    async def _m_sendReaction(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        if isinstance(chat, dict):
            return chat
        for key in ("emoji", "targetAuthor", "targetTimestamp"):
            if params.get(key) in (None, ""):
                return _error(-1, f"Missing {key}")
        return {"result": {"timestamp": self.now(), "results": []}}

    async def _m_remoteDelete(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        if isinstance(chat, dict):
            return chat
        target = self.sent.get(int(params.get("targetTimestamp") or 0))
        if target is not None and target.chat == chat:
            target.deleted = True
        return {"result": {"timestamp": self.now(), "results": []}}

    async def _m_getAttachment(self, params: dict[str, Any]) -> dict[str, Any]:
        ident = str(params.get("id") or "")
        if not ident:
            return _error(-1, "Missing attachment id parameter")
        if ident not in self.attachments:
            return _error(-1, f"Could not find attachment with ID: {ident}")
        data = self.attachments[ident][2]
        return {"result": {"data": base64.b64encode(data).decode("ascii")}}


def _error(code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "data": data}}


def _results(chat: str, kind: str, **extra: Any) -> list[dict[str, Any]]:
    """A send's per-recipient results (JsonSendMessageResult)."""
    address = {"uuid": chat, "number": ALICE_NUMBER if chat == ALICE_UUID else None}
    return [{"recipientAddress": address, "type": kind, **extra}]


def _failed(code: int, message: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """A failed send: the error, the results it wrote first as its data."""
    return _error(code, message, {"response": {"timestamp": 0, "results": results}})


def _listed(value: object) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _data_uri(uri: str) -> SentFile | None:
    """A data URI as signal-cli's DataURI.of reads it (its filename URL-decoded)."""
    match = _DATA_URI.match(uri)
    if match is None or match.group("base64") is None:
        return None
    parameters: dict[str, str] = {}
    for part in (match.group("parameters") or "").split(";")[1:]:
        key, _, value = part.partition("=")
        parameters[key] = urllib.parse.unquote(value)
    try:
        data = base64.b64decode(match.group("data"), validate=True)
    except ValueError:
        return None
    return SentFile(parameters.get("filename", ""), match.group("type") or "text/plain", data)


class SignalDriver:
    """Alice, allowed, in a private chat with the bot on a FakeSignal (PlatformDriver)."""

    kind = "signal"
    has_buttons = False

    def __init__(self, fake: FakeSignal):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            "type: signal\n"
            f"base_url: {self.fake.base_url}\n"
            f'account: "{BOT_NUMBER}"\n'
            f'allow_from: ["{ALICE_NUMBER}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {}  # the daemon has no token: it listens on loopback

    async def say(self, text: str) -> None:
        self.fake.message(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        self.fake.message(caption, attachments=[self.fake.attachment(data, media_type, name)])

    async def press(self, label: str) -> None:
        raise AssertionError("Signal has no buttons: approvals are typed")

    def texts(self) -> list[str]:
        return self.fake.texts()

    def files(self) -> list[tuple[str, bytes]]:
        return [(f.name, f.data) for m in self.fake.messages() for f in m.files]
