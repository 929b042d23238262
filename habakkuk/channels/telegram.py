"""Telegram through the Bot API over aiohttp: long polling, no public URL.

- `getUpdates` long polling; the offset (last update id + 1) is saved in
  control.db after each batch has been handed to the gateway, so a crash
  replays at most one batch, which the gateway drops as already seen.
- `base_url` (default https://api.telegram.org) lets a self-hosted Bot API
  server work.
- Text goes out as HTML rendered from Markdown in chunks under 4096
  characters; a chunk Telegram cannot parse is resent as plain text.
- Errors map to what the delivery worker needs: 403 and "chat not found" are
  Undeliverable, 429 is RetryAfter, 401 is fatal for the adapter.
- Exactly once, as near as the Bot API allows: sendMessage takes no idempotency key and
  a bot cannot read a chat's history, so a crash after Telegram took a chunk and before
  the delivery recorded it sends that chunk again on resume. The window is the time from
  Telegram's answer to the record, with nothing else in it (channels/deliveries.py: the
  record skips PostgreSQL's store writer lock; the next chunk's start rides in the same
  trip); the start of each send is written first (delivery_attempts), so such a chunk
  is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Adapter,
    Address,
    Attachment,
    Beat,
    Button,
    Callback,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    RetryAfter,
    SendError,
    Undeliverable,
    Unsupported,
)
from .format import TELEGRAM_LIMIT, html_to_plain, markdown_chunks
from .http_download import read_capped
from .platforms import AdapterContext, PlatformSetup, SetupCheckFailed, SetupField
from .store import ChannelStore

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.telegram.org"
PHOTO_LIMIT = 10 * 1024 * 1024
DOCUMENT_LIMIT = 50 * 1024 * 1024
UNDELIVERABLE_HINTS = (
    "chat not found",
    "bot was blocked",
    "user is deactivated",
    "bot was kicked",
    "not enough rights",
    "have no rights",
    "group chat was upgraded",
    "peer_id_invalid",
)


class TelegramAdapter(Adapter):
    """One Telegram bot."""

    type = "telegram"
    capabilities: frozenset[Capability] = frozenset(
        {"edit", "typing", "buttons", "reactions", "files", "polls", "download"}
    )

    def __init__(self, config: ChannelConfig, token: str, store: ChannelStore):
        super().__init__(config.name)
        self.config = config
        self.token = token
        self.store = store
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.username = ""
        self.bot_id = ""
        self._http: aiohttp.ClientSession | None = None
        self._closed = False

    # -- HTTP -----------------------------------------------------------------------

    def _session(self) -> aiohttp.ClientSession:
        if self._closed:
            # A call still in flight after close (a poll, a gateway task) must not open
            # a new session that nobody closes: the adapter is done.
            raise SendError(f"telegram {self.account}: the adapter is closed")
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

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float = 30.0,
        form: aiohttp.FormData | None = None,
    ) -> Any:
        """Call a Bot API method; returns `result` or raises the mapped error."""
        url = f"{self.base_url}/bot{self.token}/{method}"
        try:
            async with self._session().post(
                url,
                json=params if form is None else None,
                data=form,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{method}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        try:
            body = json.loads(text)
        except ValueError:
            raise SendError(f"{method}: HTTP {status}: not JSON") from None
        if isinstance(body, dict) and body.get("ok"):
            return body.get("result")
        description = str(body.get("description", "")) if isinstance(body, dict) else ""
        code = int(body.get("error_code", status)) if isinstance(body, dict) else status
        message = f"{method}: {code} {description}".strip()
        if code == 401:
            raise FatalAdapterError(f"{message} (check the bot token)")
        if code == 429:
            params_ = body.get("parameters") or {}
            raise RetryAfter(message, float(params_.get("retry_after", 5)))
        if code == 403 or any(hint in description.lower() for hint in UNDELIVERABLE_HINTS):
            raise Undeliverable(message)
        if code == 400:
            raise _BadRequest(message)
        raise SendError(message)

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        me = await self.call("getMe")
        self.username = str(me.get("username", ""))
        self.bot_id = str(me.get("id", ""))
        beat()
        saved = await self.store.offset(self.account)
        offset = int(saved) if saved else None
        while True:
            params: dict[str, Any] = {
                "timeout": self.config.poll_timeout,
                "allowed_updates": ["message", "callback_query"],
            }
            if offset is not None:
                params["offset"] = offset
            updates = await self.call("getUpdates", params, timeout=self.config.poll_timeout + 15)
            beat()
            if not updates:
                continue
            for update in updates:
                message = self.convert(update)
                if message is not None:
                    await inbox(message)
                    beat()
            offset = max(int(u["update_id"]) for u in updates) + 1
            await self.store.save_offset(self.account, str(offset))

    def convert(self, update: dict[str, Any]) -> InboundMessage | None:
        """An update as an InboundMessage (None for kinds we do not handle)."""
        if "callback_query" in update:
            query = update["callback_query"]
            carrier = query.get("message") or {}
            chat = carrier.get("chat") or {}
            sender = query.get("from") or {}
            return InboundMessage(
                channel=self.account,
                chat=str(chat.get("id", sender.get("id", ""))),
                message_id=str(carrier.get("message_id", "")),
                sender=str(sender.get("id", "")),
                sender_aliases=_aliases(sender),
                sender_name=_display(sender),
                thread=str(carrier.get("message_thread_id", ""))
                if carrier.get("is_topic_message")
                else "",
                is_group=chat.get("type") in ("group", "supergroup"),
                callback=Callback(
                    str(query.get("id", "")),
                    str(query.get("data", "")),
                    str(carrier.get("message_id", "")),
                ),
            )
        message = update.get("message")
        if not isinstance(message, dict):
            return None
        sender = message.get("from") or {}
        if sender.get("is_bot"):
            return None
        chat = message.get("chat") or {}
        text = str(message.get("text") or message.get("caption") or "")
        is_group = chat.get("type") in ("group", "supergroup")
        return InboundMessage(
            channel=self.account,
            chat=str(chat.get("id", "")),
            message_id=str(message.get("message_id", "")),
            sender=str(sender.get("id", "")),
            sender_aliases=_aliases(sender),
            sender_name=_display(sender),
            text=self._strip_mention(text),
            thread=str(message.get("message_thread_id", ""))
            if message.get("is_topic_message")
            else "",
            is_group=is_group,
            addressed=not is_group or self._addressed(message, text),
            attachments=_attachments(message),
            at=float(message.get("date", 0)) or 0.0,
        )

    def _addressed(self, message: dict[str, Any], text: str) -> bool:
        """In a group: a mention of the bot, a reply to it, or a command."""
        if self.username and f"@{self.username.lower()}" in text.lower():
            return True
        replied = (message.get("reply_to_message") or {}).get("from") or {}
        if self.bot_id and str(replied.get("id", "")) == self.bot_id:
            return True
        return text.startswith("/")

    def _strip_mention(self, text: str) -> str:
        """The text without the bot's @mention (and /cmd@bot becomes /cmd)."""
        if not self.username:
            return text
        return re.sub(rf"@{re.escape(self.username)}\b", "", text, flags=re.IGNORECASE).strip()

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return markdown_chunks(markdown, TELEGRAM_LIMIT)

    def _target(self, to: Address) -> dict[str, Any]:
        params: dict[str, Any] = {"chat_id": _chat_id(to.chat)}
        if to.thread:
            params["message_thread_id"] = int(to.thread)
        return params

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        params = self._target(to) | {"text": chunk, "parse_mode": "HTML"}
        if reply_to:
            params["reply_parameters"] = {
                "message_id": int(reply_to),
                "allow_sending_without_reply": True,
            }
        if buttons:
            params["reply_markup"] = _keyboard(buttons)
        if silent:
            params["disable_notification"] = True
        try:
            result = await self.call("sendMessage", params)
        except _BadRequest as exc:
            if "parse" not in str(exc).lower():
                raise Undeliverable(str(exc)) from None
            # Markup Telegram rejects: the same words as plain text.
            params.pop("parse_mode")
            params["text"] = html_to_plain(chunk)
            result = await self._bad_request_is_final("sendMessage", params)
        return str(result["message_id"])

    async def _bad_request_is_final(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self.call(method, params)
        except _BadRequest as exc:
            raise Undeliverable(str(exc)) from None

    async def edit_text(
        self, to: Address, message_id: str, chunk: str, buttons: list[list[Button]] | None = None
    ) -> None:
        params = self._target(to) | {
            "message_id": int(message_id),
            "text": chunk,
            "parse_mode": "HTML",
        }
        params.pop("message_thread_id", None)
        if buttons:
            params["reply_markup"] = _keyboard(buttons)
        try:
            await self.call("editMessageText", params)
        except _BadRequest as exc:
            if "not modified" in str(exc).lower():
                return
            raise Undeliverable(str(exc)) from None

    async def delete(self, to: Address, message_id: str) -> None:
        await self._bad_request_is_final(
            "deleteMessage", {"chat_id": _chat_id(to.chat), "message_id": int(message_id)}
        )

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        with contextlib.suppress(_BadRequest):  # already without buttons
            await self.call(
                "editMessageReplyMarkup",
                {"chat_id": _chat_id(to.chat), "message_id": int(message_id)},
            )

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        params: dict[str, Any] = {"callback_query_id": callback.id}
        if text:
            params["text"] = text
        with contextlib.suppress(_BadRequest):  # too old to answer; the press was handled
            await self.call("answerCallbackQuery", params)

    async def typing(self, to: Address) -> None:
        await self._bad_request_is_final("sendChatAction", self._target(to) | {"action": "typing"})

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:
        reaction = [{"type": "emoji", "emoji": emoji}] if emoji else []
        await self._bad_request_is_final(
            "setMessageReaction",
            {"chat_id": _chat_id(to.chat), "message_id": int(message_id), "reaction": reaction},
        )

    async def download(self, attachment: Attachment) -> bytes:
        info = await self._bad_request_is_final("getFile", {"file_id": attachment.file_id})
        path = str(info.get("file_path", ""))
        if not path:
            raise Undeliverable(f"getFile: no file_path for {attachment.name}")
        url = f"{self.base_url}/file/bot{self.token}/{path}"
        try:
            async with self._session().get(
                url, timeout=aiohttp.ClientTimeout(total=300)
            ) as response:
                if response.status != 200:
                    raise SendError(f"download {attachment.name}: HTTP {response.status}")
                return await read_capped(response, self.max_file_bytes, attachment.name)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"download {attachment.name}: {exc}") from None

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        photo = name.lower().endswith((".jpg", ".jpeg", ".png")) and len(data) <= PHOTO_LIMIT
        if not photo and len(data) > DOCUMENT_LIMIT:
            raise Unsupported(f"{name} is over Telegram's 50 MB limit")
        form = aiohttp.FormData()
        for key, value in self._target(to).items():
            form.add_field(key, str(value))
        if caption:
            form.add_field("caption", caption[:1024])
        field = "photo" if photo else "document"
        form.add_field(field, data, filename=name)
        method = "sendPhoto" if photo else "sendDocument"
        result = await self._bad_request_is_final_form(method, form)
        return str(result["message_id"])

    async def send_voice(
        self,
        to: Address,
        path: Path,
        *,
        duration: float | None = None,
        caption: str = "",
        name: str = "",
    ) -> str:
        """A voice note (sendVoice, with its length in whole seconds); audio that is not
        Ogg Opus goes as a document, which Telegram would not play as a voice note."""
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if data[:4] != b"OggS":
            return await self.send_file(to, path, caption=caption, name=name)
        if len(data) > DOCUMENT_LIMIT:
            raise Unsupported(f"{name} is over Telegram's 50 MB limit")
        form = aiohttp.FormData()
        for key, value in self._target(to).items():
            form.add_field(key, str(value))
        if caption:
            form.add_field("caption", caption[:1024])
        if duration is not None:
            form.add_field("duration", str(max(1, round(duration))))
        form.add_field("voice", data, filename=name, content_type="audio/ogg")
        result = await self._bad_request_is_final_form("sendVoice", form)
        return str(result["message_id"])

    async def _bad_request_is_final_form(self, method: str, form: aiohttp.FormData) -> Any:
        try:
            return await self.call(method, form=form, timeout=300)
        except _BadRequest as exc:  # this file refused; the chat itself is reachable
            raise Unsupported(str(exc)) from None

    async def send_poll(
        self, to: Address, question: str, options: list[str], *, multiple: bool = False
    ) -> str:
        params = self._target(to) | {
            "question": question,
            "options": [{"text": o} for o in options],
            "allows_multiple_answers": multiple,
            "is_anonymous": False,
        }
        result = await self._bad_request_is_final("sendPoll", params)
        return str(result["message_id"])


class _BadRequest(SendError):
    """A 400 from the Bot API; callers decide whether a fallback applies."""


def _chat_id(chat: str) -> int | str:
    try:
        return int(chat)
    except ValueError:
        return chat  # @channelusername


def _keyboard(buttons: list[list[Button]]) -> dict[str, Any]:
    return {
        "inline_keyboard": [
            [{"text": b.text, "callback_data": b.data} for b in row] for row in buttons
        ]
    }


def _aliases(user: dict[str, Any]) -> list[str]:
    return [f"@{user['username']}"] if user.get("username") else []


def _display(user: dict[str, Any]) -> str:
    return " ".join(str(user[k]) for k in ("first_name", "last_name") if user.get(k)).strip()


def _attachments(message: dict[str, Any]) -> list[Attachment]:
    found: list[Attachment] = []
    photos = message.get("photo")
    if isinstance(photos, list) and photos:
        biggest = photos[-1]  # Telegram lists sizes smallest first
        found.append(
            Attachment(
                "photo",
                str(biggest["file_id"]),
                "photo.jpg",
                "image/jpeg",
                biggest.get("file_size"),
            )
        )
    document = message.get("document")
    if isinstance(document, dict):
        found.append(
            Attachment(
                "document",
                str(document["file_id"]),
                str(document.get("file_name") or "document"),
                str(document.get("mime_type") or "application/octet-stream"),
                document.get("file_size"),
            )
        )
    for kind in ("voice", "audio"):
        item = message.get(kind)
        if isinstance(item, dict):
            found.append(
                Attachment(
                    kind,
                    str(item["file_id"]),
                    str(item.get("file_name") or f"{kind}.ogg"),
                    str(item.get("mime_type") or "audio/ogg"),
                    item.get("file_size"),
                )
            )
    return found


def build(config: ChannelConfig, context: AdapterContext) -> TelegramAdapter:
    """The adapter of one Telegram account (habakkuk.channels.platforms)."""
    return TelegramAdapter(config, context.secret(config, "token_env"), context.store)


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask Telegram who the token belongs to (getMe): "@name", or SetupCheckFailed."""
    base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
    token = secrets.get(config.token_env or "", "")
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as http,
            http.get(f"{base}/bot{token}/getMe") as response,
        ):
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
    if not isinstance(body, dict) or not body.get("ok"):
        why = body.get("description", "") if isinstance(body, dict) else "not a Bot API answer"
        raise SetupCheckFailed(f"Telegram refused the token: {why}")
    return f"@{body['result'].get('username', '?')}"


SETUP = PlatformSetup(
    type="telegram",
    title="Telegram",
    instructions=(
        "1. In Telegram, open @BotFather and send /newbot; choose a name and a username.\n"
        "2. BotFather answers with the bot's token (123456:ABC...): paste it below.\n"
        "3. Optional: /setprivacy -> Disable lets the bot read every group message "
        "(needed for groups: all)."
    ),
    fields=(
        SetupField("token_env", "Bot token", secret=True, variable="TELEGRAM_BOT_TOKEN"),
        SetupField(
            "allow_from",
            "Your Telegram user id or @username (others pair with a code)",
            help="message @userinfobot to learn your id",
        ),
    ),
    check=check_setup,
)
