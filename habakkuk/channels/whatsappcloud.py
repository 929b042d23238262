"""The WhatsApp Business Cloud API: Meta calls `/channels/<account>`, replies go through
the Graph API (habakkuk/channels/metagraph.py) from one business phone number.

- In: the `messages` webhook of the app (signed with X-Hub-Signature-256; the GET
  handshake answered with hub.challenge), for our `phone_number_id` only. The chat is the
  customer's WhatsApp id (wa_id, their number without +); there are no groups, so every
  message is addressed. Meta retries an event it got no 200 for, and the gateway takes
  each message id (wamid) once. A reply button pressed is a Callback.
- Out: WhatsApp markup in chunks; approvals with interactive reply buttons (a list when
  there are more than three choices); files uploaded to /<phone_number_id>/media and sent
  by their media id.
- The 24-hour customer-service window is tracked per customer
  (habakkuk/channels/whatsappcloud_window.py). Outside it the configured approved
  `template` goes instead, its one body parameter carrying the text; without a template
  the delivery fails saying why. A 131047 from the API closes the window early.
- The Cloud API has no idempotency key: a crash between its answer and our record sends
  that part again (the delivery worker's record of each send's start bounds it).

Why no SDK: Meta publishes none for Python; the community ones wrap requests or httpx
around the same few JSON calls aiohttp (a core dependency) makes here.
"""

from __future__ import annotations

import logging
import mimetypes
import re
from pathlib import Path
from typing import Any

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.i18n import t

from .adapter import (
    Address,
    Attachment,
    Button,
    Callback,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    SendError,
    Unsupported,
)
from .format_whatsapp import whatsapp_chunks
from .metagraph import GraphClient, WindowClosed
from .metagraph_hook import GraphWebhookAdapter, media_host_ok
from .platforms import AdapterContext
from .webhook import WebhookDoor
from .whatsappcloud_setup import WHATSAPPCLOUD_SETUP
from .whatsappcloud_window import ServiceWindows

log = logging.getLogger(__name__)

DOCUMENT_BYTES = 100 * 1024 * 1024  # the Cloud API's largest document
BODY_LIMIT = 1024  # an interactive message's body, a template parameter
BUTTON_TITLE = 20  # a reply button's title
ROW_TITLE = 24  # a list row's title
_KINDS = {
    "image": "photo",
    "sticker": "photo",
    "document": "document",
    "audio": "audio",
    "video": "video",
}
_SENDABLE = {
    "image/jpeg": "image",
    "image/png": "image",
    "video/mp4": "video",
    "video/3gpp": "video",
    "audio/ogg": "audio",
    "audio/mpeg": "audio",
    "audio/aac": "audio",
    "audio/mp4": "audio",
    "audio/amr": "audio",
}


class WhatsAppCloudAdapter(GraphWebhookAdapter):
    """One business phone number of one WhatsApp Business Account."""

    type = "whatsappcloud"
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download"})
    max_file_bytes = DOCUMENT_BYTES

    def __init__(
        self,
        config: ChannelConfig,
        door: WebhookDoor,
        graph: GraphClient,
        secrets: tuple[str, str],
        windows: ServiceWindows,
    ):
        super().__init__(config, door, graph, *secrets)
        self.number = config.phone_number_id or ""
        self.windows = windows

    async def close(self) -> None:
        if self.windows.dirty:
            self.windows.flush()
        await super().close()

    async def connect(self) -> None:
        """Check the token reaches the number before taking requests."""
        await self.graph.get(self.number, {"fields": "display_phone_number,verified_name"})

    # -- in -------------------------------------------------------------------------

    async def take_event(self, payload: dict[str, Any], inbox: Inbox) -> None:
        if payload.get("object") != "whatsapp_business_account":
            return
        for entry in _dicts(payload.get("entry")):
            for change in _dicts(entry.get("changes")):
                value = change.get("value")
                if change.get("field") != "messages" or not isinstance(value, dict):
                    continue
                metadata = value.get("metadata")
                number = metadata.get("phone_number_id") if isinstance(metadata, dict) else ""
                if number != self.number:
                    continue  # another number of the same app
                names = {
                    str(c.get("wa_id", "")): str((c.get("profile") or {}).get("name", ""))
                    for c in _dicts(value.get("contacts"))
                }
                for raw in _dicts(value.get("messages")):
                    message = self.convert(raw, names)
                    if message is not None:
                        self.windows.opened(message.sender, message.at)
                        await inbox(message)

    def convert(self, raw: dict[str, Any], names: dict[str, str]) -> InboundMessage | None:
        """One webhook message in the gateway's terms (None for kinds we do not take)."""
        sender, wamid, kind = str(raw.get("from", "")), str(raw.get("id", "")), raw.get("type")
        if not sender or not wamid:
            return None
        stamp = str(raw.get("timestamp", ""))
        message = InboundMessage(
            channel=self.account,
            chat=sender,
            message_id=wamid,
            sender=sender,
            sender_aliases=["+" + sender],
            sender_name=names.get(sender, ""),
        )
        if stamp.isdigit():
            message.at = float(stamp)
        context = raw.get("context")
        replied = str(context.get("id", "")) if isinstance(context, dict) else ""
        if kind == "text":
            message.text = str((raw.get("text") or {}).get("body", ""))
        elif kind == "interactive":
            interactive = raw.get("interactive") or {}
            picked = interactive.get(str(interactive.get("type", ""))) or {}
            message.callback = Callback(wamid, str(picked.get("id", "")), replied)
        elif kind == "button":  # a template's quick reply: its payload is the answer
            message.text = str((raw.get("button") or {}).get("text", ""))
        elif isinstance(kind, str) and kind in _KINDS:
            media = raw.get(kind) or {}
            media_id = str(media.get("id", ""))
            if not media_id:
                return None
            media_type = str(media.get("mime_type", "application/octet-stream")).split(";")[0]
            name = str(media.get("filename") or media_id + _suffix(media_type))
            # a voice note recorded in WhatsApp is audio marked voice
            found = "voice" if kind == "audio" and media.get("voice") else _KINDS[kind]
            message.text = str(media.get("caption", ""))
            message.attachments.append(Attachment(found, media_id, name, media_type))  # type: ignore[arg-type]  # one of Attachment's kinds
        else:
            log.info("whatsappcloud %s: skipped a %s message", self.account, kind)
            return None
        return message

    async def download(self, attachment: Attachment) -> bytes:
        found = await self.call("media", self.graph.get(attachment.file_id))
        url = str(found.get("url", ""))
        if not media_host_ok(url, self.graph.root):
            raise SendError(f"whatsappcloud {self.account}: a media URL not on Meta's hosts")
        return await self.graph.download(url, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return whatsapp_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        flat = [button for row in buttons or [] for button in row]
        if flat and len(chunk) > BODY_LIMIT:
            # an interactive body holds 1024 characters: the text before goes on its own
            head, chunk = _split_tail(chunk, BODY_LIMIT)
            await self._free_form(to, _text_body(head, reply_to), template_text=head)
            reply_to = None
        body = _interactive(chunk, flat) if flat else _text_body(chunk, reply_to)
        if flat and reply_to:
            body["context"] = {"message_id": reply_to}
        return await self._free_form(to, body, template_text=chunk)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        name = name or path.name
        data = path.read_bytes()
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{name} is over WhatsApp's 100 MB limit")
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        kind = _SENDABLE.get(media_type, "document")
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", media_type)
        form.add_field("file", data, filename=name, content_type=media_type)
        if not self.windows.is_open(to.chat):
            raise WindowClosed(self._closed_reason(to, "a file"))
        uploaded = await self.call(
            "upload", self.graph.call("POST", f"{self.number}/media", form=form)
        )
        media: dict[str, Any] = {"id": str(uploaded.get("id", ""))}
        if kind == "document":
            media["filename"] = name
        if caption and kind != "audio":
            media["caption"] = caption[:BODY_LIMIT]
        return await self._free_form(to, {"type": kind, kind: media})

    def _closed_reason(self, to: Address, what: str) -> str:
        return (
            f"whatsappcloud {self.account}: {what} cannot reach {to.chat}: more than 24 "
            "hours since their last message (WhatsApp's customer-service window)"
        )

    async def _free_form(
        self, to: Address, body: dict[str, Any], template_text: str | None = None
    ) -> str:
        """Send a free-form message inside the window; outside it the template carrying
        `template_text` (when given and configured), else WindowClosed."""
        if self.windows.is_open(to.chat):
            try:
                return await self._post(to, body)
            except WindowClosed:
                self.windows.closed(to.chat)
        if template_text is None or not self.config.template:
            what = "a file" if template_text is None else "a message"
            raise WindowClosed(
                self._closed_reason(to, what)
                + ("" if template_text is None else f"; set channels.{self.account}.template")
            )
        return await self._post(to, self._template(template_text))

    def _template(self, text: str) -> dict[str, Any]:
        # A template parameter takes no line breaks, tabs or runs of spaces.
        flat = re.sub(r"\s+", " ", text).strip() or "…"
        return {
            "type": "template",
            "template": {
                "name": self.config.template,
                "language": {"code": self.config.template_language or "en_US"},
                "components": [
                    {"type": "body", "parameters": [{"type": "text", "text": flat[:BODY_LIMIT]}]}
                ],
            },
        }

    async def _post(self, to: Address, body: dict[str, Any]) -> str:
        message = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to.chat}
        found = await self.call("send", self.graph.post(f"{self.number}/messages", message | body))
        sent = [m for m in _dicts(found.get("messages")) if m.get("id")]
        return str(sent[0]["id"]) if sent else ""


def _text_body(text: str, reply_to: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "text", "text": {"body": text, "preview_url": False}}
    if reply_to:
        body["context"] = {"message_id": reply_to}
    return body


def _interactive(text: str, buttons: list[Button]) -> dict[str, Any]:
    """Reply buttons (three at most), else a list of up to ten rows."""
    if len(buttons) <= 3:
        action: dict[str, Any] = {
            "buttons": [
                {"type": "reply", "reply": {"id": b.data, "title": b.text[:BUTTON_TITLE]}}
                for b in buttons
            ]
        }
        kind = "button"
    else:
        rows = [{"id": b.data, "title": b.text[:ROW_TITLE]} for b in buttons[:10]]
        label = t("channel.whatsappcloud.choose")[:BUTTON_TITLE]
        action = {"button": label, "sections": [{"title": label[:ROW_TITLE], "rows": rows}]}
        kind = "list"
    return {
        "type": "interactive",
        "interactive": {"type": kind, "body": {"text": text}, "action": action},
    }


def _split_tail(text: str, limit: int) -> tuple[str, str]:
    """`text` as (head, tail) with the tail at most `limit` characters, cut at a line."""
    cut = text.rfind("\n", len(text) - limit)
    cut = cut + 1 if cut > 0 else len(text) - limit
    return text[:cut].rstrip("\n") or text[:cut], text[cut:]


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _suffix(media_type: str) -> str:
    return mimetypes.guess_extension(media_type) or ""


def build(config: ChannelConfig, context: AdapterContext) -> WhatsAppCloudAdapter:
    """The adapter of one business phone number (habakkuk.channels.platforms)."""
    if not config.phone_number_id:
        raise FatalAdapterError(
            f"channels.{config.name}: a whatsappcloud channel needs phone_number_id"
        )
    graph = GraphClient(context.secret(config, "token_env"), config.base_url or "")
    secrets = (context.secret(config, "app_secret_env"), context.secret(config, "verify_token_env"))
    windows = ServiceWindows.load(context.state_path(config))
    return WhatsAppCloudAdapter(config, context.door, graph, secrets, windows)


SETUP = WHATSAPPCLOUD_SETUP
