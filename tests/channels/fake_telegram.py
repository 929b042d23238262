"""A fake Telegram Bot API server on 127.0.0.1 speaking the real wire format.

It serves ``POST /bot<token>/<method>`` (JSON or multipart bodies; GET with a
query string too, as the Bot API does) for getMe, getUpdates (long polling:
held until an update arrives or the timeout passes; updates below the offset
are confirmed and dropped), sendMessage, editMessageText,
editMessageReplyMarkup, deleteMessage, sendChatAction, answerCallbackQuery,
setMessageReaction, getFile, sendDocument, sendPhoto, sendVoice and sendPoll, and
``GET /file/bot<token>/<path>`` downloads. Answers use the Bot
API's envelope: ``{"ok": true, "result": ...}`` or ``{"ok": false,
"error_code": N, "description": "..."}``.

Tests script users (`message`, `press`), inspect what the bot did (`calls`,
`texts`, `sent_files`), hold sends to stop the bot mid-delivery (`hold_sends_after`),
make a chat undeliverable (`block`), refuse documents (`refuse_files`), leave long polls
unanswered while the socket stays open (`hang_polls`: a silent platform), and drop the
server to test reconnects (`stop` / `start` on the same port). `wait_for(predicate)`
waits, bounded, for a condition on what the server saw.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

BOT = {"id": 777000, "is_bot": True, "first_name": "Habakkuk", "username": "habakkuk_bot"}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    answered: bool = True


BOT_TOKEN = "123:SECRET"  # the bot of the shared `tg` fixture (tests/conftest.py)


class FakeTelegram:
    """The fake Bot API. Use as `async with FakeTelegram(token="T") as tg:`."""

    def __init__(self, token: str = "TEST:TOKEN", port: int = 0):
        self.token = token
        self.port = port
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.blocked: set[int] = set()
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._next_update = 1000
        self._next_message = 500
        self._changed = asyncio.Condition()
        self._hold_after: int | None = None
        self._hold_made = False
        self.refused_files = ""  # a Bad Request description for every sendDocument
        # every file the bot uploaded that the server accepted: (chat, file name, bytes)
        self.sent_files: list[tuple[int, str, bytes]] = []
        self._polls_answered = asyncio.Event()
        self._polls_answered.set()
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/bot{token}/{method}", self._method)
        # The Bot API takes GET too, its parameters in the query string (setup's getMe).
        app.router.add_get("/bot{token}/{method}", self._method)
        app.router.add_get("/file/bot{token}/{path:.*}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Drop the server (open long polls are cut off)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        self._polls_answered.set()
        await self.stop()

    # -- scripting users -----------------------------------------------------------------

    def _push(self, update: dict[str, Any]) -> dict[str, Any]:
        self.updates.append(update)
        asyncio.get_running_loop().create_task(self._notify())
        return update

    def message(
        self,
        text: str = "",
        *,
        chat: int = 42,
        user: int = 42,
        username: str | None = "alice",
        chat_type: str = "private",
        **extra: Any,
    ) -> dict[str, Any]:
        """A user writes to the bot; returns the update."""
        self._next_update += 1
        self._next_message += 1
        sender: dict[str, Any] = {"id": user, "is_bot": False, "first_name": f"User{user}"}
        if username:
            sender["username"] = username
        body: dict[str, Any] = {
            "message_id": self._next_message,
            "from": sender,
            "chat": {"id": chat, "type": chat_type},
            "date": int(time.time()),
            **extra,
        }
        if text:
            body["text"] = text
        return self._push({"update_id": self._next_update, "message": body})

    def press(
        self, data: str, *, message_id: int, chat: int = 42, user: int = 42
    ) -> dict[str, Any]:
        """A user presses an inline button; returns the update."""
        self._next_update += 1
        query = {
            "id": f"cbq{self._next_update}",
            "from": {"id": user, "is_bot": False, "first_name": f"User{user}"},
            "chat_instance": "1",
            "data": data,
            "message": {
                "message_id": message_id,
                "from": BOT,
                "chat": {"id": chat, "type": "private"},
                "date": int(time.time()),
                "text": "…",
            },
        }
        return self._push({"update_id": self._next_update, "callback_query": query})

    def replay(self, update: dict[str, Any]) -> None:
        """Deliver an update again, as after a lost acknowledgement."""
        self._push(update)

    def add_file(self, file_id: str, data: bytes, path: str) -> None:
        self.files[file_id] = (path, data)

    def block(self, chat: int) -> None:
        """The user blocked the bot: sends to this chat get 403."""
        self.blocked.add(chat)

    def refuse_files(self, description: str) -> None:
        """sendDocument answers 400 with `description` (e.g. the file is too big)."""
        self.refused_files = description

    def hold_sends_after(self, count: int | None, *, made: bool = False) -> None:
        """sendMessage calls after the first `count` hang until `release_sends`, then fail;
        with `made`, the message is in the chat first (the answer is what never arrives)."""
        self._hold_after = count
        self._hold_made = made
        self._release.clear()

    def release_sends(self) -> None:
        self._hold_after = None
        self._release.set()

    def hang_polls(self, hang: bool = True) -> None:
        """getUpdates stays unanswered (the connection open, nothing said) until
        `hang_polls(False)`: a platform gone silent behind a live socket."""
        if hang:
            self._polls_answered.clear()
        else:
            self._polls_answered.set()

    # -- inspecting ----------------------------------------------------------------------

    def of(self, method: str, *, answered: bool | None = True) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.method == method and (answered is None or c.answered == answered)
        ]

    def texts(self, chat: int = 42) -> list[str]:
        """Texts the bot sent to a chat that the server accepted, in order."""
        return [
            str(c.params.get("text", ""))
            for c in self.of("sendMessage")
            if int(c.params.get("chat_id", 0)) == chat
        ]

    def in_chat(self, chat: int = 42) -> list[str]:
        """The texts of the bot's messages in a chat, in order: what the person sees
        (a message made while the bot never heard the answer too)."""
        return [
            str(message["text"])
            for (chat_id, _), message in sorted(self.messages.items())
            if chat_id == chat and message.get("from") == BOT
        ]

    def message_id_of(self, text: str, chat: int = 42) -> int:
        """The id of the message the bot sent with this text."""
        for (chat_id, message_id), message in self.messages.items():
            if chat_id == chat and message["text"] == text:
                return message_id
        raise KeyError(text)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        """Wait until `predicate()` holds (checked after every request), at most `timeout`."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- the API -------------------------------------------------------------------------

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401}, status=401)
        path = request.match_info["path"]
        for stored_path, data in self.files.values():
            if stored_path == path:
                return web.Response(body=data)
        return web.Response(status=404)

    async def _params(
        self, request: web.Request, uploads: list[tuple[str, bytes]]
    ) -> dict[str, Any]:
        """The call's parameters; an uploaded file's bytes go to `uploads`."""
        if request.method == "GET":
            return dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            return dict(body) if isinstance(body, dict) else {}
        if request.content_type.startswith("multipart/"):
            params: dict[str, Any] = {}
            async for part in await request.multipart():
                # A form's parts are named fields, never nested multiparts.
                assert isinstance(part, BodyPartReader) and part.name is not None
                if part.filename:
                    data = bytes(await part.read())
                    uploads.append((part.filename, data))
                    params[part.name] = {"filename": part.filename, "size": len(data)}
                else:
                    params[part.name] = await part.text()
            return params
        form = await request.post()
        return {k: v for k, v in form.items()}

    async def _method(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        uploads: list[tuple[str, bytes]] = []
        params = await self._params(request, uploads)
        call = Call(method, params, answered=False)
        self.calls.append(call)
        await self._notify()
        try:
            response = await self._answer(method, params)
        finally:
            await self._notify()
        call.answered = response.status == 200
        if call.answered:
            chat = int(params.get("chat_id", 0))
            self.sent_files += [(chat, name, data) for name, data in uploads]
        await self._notify()
        return response

    async def _answer(self, method: str, params: dict[str, Any]) -> web.Response:
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result = await handler(params)
        if isinstance(result, web.Response):
            return result
        return web.json_response({"ok": True, "result": result})

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return BOT

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        await self._polls_answered.wait()
        offset = int(params.get("offset", 0) or 0)
        timeout = float(params.get("timeout", 0) or 0)
        if offset:
            self.updates = [u for u in self.updates if u["update_id"] >= offset]

        def ready() -> bool:
            return (
                any(u["update_id"] >= offset for u in self.updates)
                if offset
                else bool(self.updates)
            )

        if not ready() and timeout:
            try:
                async with self._changed:
                    await asyncio.wait_for(self._changed.wait_for(ready), timeout)
            except TimeoutError:
                pass
        return [u for u in self.updates if not offset or u["update_id"] >= offset][:100]

    def _check_chat(self, params: dict[str, Any]) -> web.Response | None:
        chat = int(params.get("chat_id", 0))
        if chat in self.blocked:
            return _error(403, "Forbidden: bot was blocked by the user")
        return None

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        blocked = self._check_chat(params)
        if blocked is not None:
            return blocked
        if self._hold_after is not None and len(self.of("sendMessage", answered=None)) > (
            self._hold_after
        ):
            # Held until released, then failed (the bot was killed while waiting for the
            # answer): the chat never got this message, or, `made`, got it.
            if self._hold_made:
                self._new_message(params)
                await self._notify()
            await self._release.wait()
            return _error(502, "Bad Gateway: held send dropped")
        if not str(params.get("text", "")).strip():
            return _error(400, "Bad Request: message text is empty")
        if len(str(params.get("text", ""))) > 4096:
            return _error(400, "Bad Request: message is too long")
        return self._new_message(params)

    def _new_message(self, params: dict[str, Any]) -> dict[str, Any]:
        self._next_message += 1
        chat = int(params.get("chat_id", 0))
        message = {
            "message_id": self._next_message,
            "from": BOT,
            "chat": {"id": chat, "type": "private"},
            "date": int(time.time()),
            "text": params.get("text", ""),
        }
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        self.messages[(chat, self._next_message)] = message
        return message

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        key = (int(params.get("chat_id", 0)), int(params.get("message_id", 0)))
        if key not in self.messages:
            return _error(400, "Bad Request: message to edit not found")
        if self.messages[key]["text"] == params.get("text"):
            return _error(400, "Bad Request: message is not modified")
        self.messages[key]["text"] = params.get("text", "")
        return self.messages[key]

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        key = (int(params.get("chat_id", 0)), int(params.get("message_id", 0)))
        if key not in self.messages:
            return _error(400, "Bad Request: message to edit not found")
        self.messages[key].pop("reply_markup", None)
        return self.messages[key]

    async def _m_deleteMessage(self, params: dict[str, Any]) -> Any:
        key = (int(params.get("chat_id", 0)), int(params.get("message_id", 0)))
        if self.messages.pop(key, None) is None:
            return _error(400, "Bad Request: message to delete not found")
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return self._check_chat(params) or True

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_setMessageReaction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            return _error(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": len(data),
            "file_path": path,
        }

    async def _m_sendDocument(self, params: dict[str, Any]) -> Any:
        if self.refused_files and self._check_chat(params) is None:
            return _error(400, self.refused_files)
        return self._check_chat(params) or self._new_message({**params, "text": ""})

    async def _m_sendVoice(self, params: dict[str, Any]) -> Any:
        # The Bot API takes a voice note as an upload in the field `voice`.
        if not isinstance(params.get("voice"), dict):
            return _error(400, "Bad Request: there is no voice in the request")
        return self._check_chat(params) or self._new_message({**params, "text": ""})

    async def _m_sendPhoto(self, params: dict[str, Any]) -> Any:
        return self._check_chat(params) or self._new_message({**params, "text": ""})

    async def _m_sendPoll(self, params: dict[str, Any]) -> Any:
        return self._check_chat(params) or self._new_message({**params, "text": ""})


def _error(code: int, description: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error_code": code, "description": description}, status=code
    )


def dumps(data: Any) -> str:
    return json.dumps(data)
