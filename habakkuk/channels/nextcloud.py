"""Nextcloud Talk: a Talk bot. Talk calls `/channels/<account>` with each message of the
conversations the bot was added to; replies go to the bot API of the same server.

- In: Talk POSTs an ActivityStreams 2.0 JSON body (`type: Create`, the `actor`, the
  `object` whose `content` is JSON with the `message` and its `parameters`, the
  conversation as `target`), with `X-Nextcloud-Talk-Random` and
  `X-Nextcloud-Talk-Signature` = hex HMAC-SHA256 of the random followed by the body,
  keyed with the bot's shared secret. A request without a valid signature, from another
  server than ours (`X-Nextcloud-Talk-Backend`), or repeating a random already seen (a
  replay) gets 401 and starts nothing. Placeholders (`{mention-user1}`, `{file}`) are
  written out with their names.
- Who and where: the chat is the conversation's token; the sender the user id
  (`users/alice` gives `alice`, the full id an alias). Talk hands a bot every message of
  its conversations (there is no mentioning a bot), so each conversation is one chat,
  gated by allow_from. Messages of bots (ours among them) are never taken.
- Out: `POST /ocs/v2.php/apps/spreed/api/v1/bot/<token>/message` with the Markdown
  (Talk renders it), `X-Nextcloud-Talk-Bot-Random` and `-Signature` = HMAC-SHA256 of the
  random followed by the message; the first chunk answers the message (`replyTo`). Talk
  gives no message id back: each send carries a `referenceId` of our own, which is its
  id for us. A bot cannot upload files, so none go out (the person is told), and
  approvals are typed.

No SDK: Talk has no Python bot SDK; one HMAC each way and one POST, with aiohttp.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
from collections import OrderedDict
from typing import Any

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Address,
    Button,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    RetryAfter,
    SendError,
    Undeliverable,
)
from .chunking import Renderer, chunks
from .nextcloud_setup import SETUP as SETUP  # the registry reads a platform's step here
from .platforms import AdapterContext
from .webhook import UNAUTHORIZED, WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

CHUNK = 30000  # Talk's limit is 32,000 characters
SEEN_RANDOMS = 10000  # randoms remembered to refuse a replayed request
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_-]+)\}")
_RENDERER = Renderer(
    text=lambda lines: "\n".join(lines),
    code=lambda lines, language: "\n".join([f"```{language}", *lines, "```"]),
    escape=lambda text: text,
    fallback=lambda markdown, limit: markdown[:limit],
)


def talk_signature(secret: str, random: str, payload: bytes) -> str:
    """Talk's signature: hex HMAC-SHA256 of `random` followed by `payload`."""
    return hmac.new(secret.encode(), random.encode() + payload, hashlib.sha256).hexdigest()


class TalkAdapter(WebhookAdapter):
    """One Talk bot on one Nextcloud server."""

    type = "nextcloud"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, config: ChannelConfig, door: WebhookDoor, secret: str):
        super().__init__(config, door)
        self.base_url = (config.base_url or "").rstrip("/")
        self.secret = secret
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._http: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        random = request.headers.get("X-Nextcloud-Talk-Random", "")
        given = request.headers.get("X-Nextcloud-Talk-Signature", "")
        backend = request.headers.get("X-Nextcloud-Talk-Backend", "").rstrip("/")
        if request.method != "POST" or len(random) < 32 or not given:
            return False
        expected = talk_signature(self.secret, random, request.body)
        if not hmac.compare_digest(expected, given.lower()):
            return False
        if backend != self.base_url or random in self._seen:
            return False  # another server's bot with our secret, or a replay
        self._seen[random] = None
        while len(self._seen) > SEEN_RANDOMS:
            self._seen.popitem(last=False)
        return True

    async def receive(self, request: WebhookRequest) -> WebhookReply:
        reply = await super().receive(request)
        return UNAUTHORIZED if reply.status == 403 else reply  # what Talk expects

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        try:
            event = json.loads(request.body)
        except ValueError:
            return WebhookReply(400, b"not JSON")
        message = self.convert(event) if isinstance(event, dict) else None
        if message is not None:
            await inbox(message)
        return WebhookReply(200, b"")

    def convert(self, event: dict[str, Any]) -> InboundMessage | None:
        """A `Create` activity as an InboundMessage (None for anything else, and bots)."""
        actor, note, target = event.get("actor"), event.get("object"), event.get("target")
        if event.get("type") != "Create" or not (
            isinstance(actor, dict) and isinstance(note, dict) and isinstance(target, dict)
        ):
            return None
        who = str(actor.get("id") or "")
        if not who or who.startswith("bots/"):
            return None
        try:
            content = json.loads(str(note.get("content") or ""))
        except ValueError:
            return None
        if not isinstance(content, dict):
            return None
        text = _written_out(str(content.get("message") or ""), content.get("parameters"))
        if not text.strip():
            return None
        user = who.removeprefix("users/")
        return InboundMessage(
            channel=self.account,
            chat=str(target.get("id") or ""),
            message_id=str(note.get("id") or ""),
            sender=user,
            sender_aliases=[who] if who != user else [],
            sender_name=str(actor.get("name") or user),
            text=text.strip(),
        )

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return chunks(markdown, CHUNK, _RENDERER)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        random = secrets.token_hex(32)
        reference = secrets.token_hex(32)
        body: dict[str, object] = {"message": chunk, "referenceId": reference}
        if silent:
            body["silent"] = True
        if reply_to and reply_to.isdigit():
            body["replyTo"] = int(reply_to)
        headers = {
            "OCS-APIRequest": "true",
            "Accept": "application/json",
            "X-Nextcloud-Talk-Bot-Random": random,
            "X-Nextcloud-Talk-Bot-Signature": talk_signature(self.secret, random, chunk.encode()),
        }
        url = f"{self.base_url}/ocs/v2.php/apps/spreed/api/v1/bot/{to.chat}/message"
        try:
            async with self.session().post(url, json=body, headers=headers) as response:
                status = response.status
                retry = response.headers.get("Retry-After", "")
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"bot message: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        if status == 401:
            raise FatalAdapterError(
                f"Nextcloud Talk at {self.base_url} refused the bot's signature (HTTP 401: "
                "check token_env, the secret the bot was installed with)"
            )
        if status == 429:
            raise RetryAfter("bot message: Talk's rate limit", float(retry or 5))
        if status in (400, 404, 413):  # no such conversation, bot not in it, too long
            raise Undeliverable(f"bot message to {to.chat}: HTTP {status}")
        if status not in (200, 201):
            raise SendError(f"bot message: HTTP {status}")
        return reference


def _written_out(message: str, parameters: object) -> str:
    """The message with its `{placeholders}` replaced by the names they stand for."""
    if not isinstance(parameters, dict):
        return message

    def name(match: re.Match[str]) -> str:
        found = parameters.get(match.group(1))
        if not isinstance(found, dict):
            return match.group(0)
        label = str(found.get("name") or match.group(1))
        return f"@{label}" if str(found.get("type", "")).endswith("user") else label

    return _PLACEHOLDER.sub(name, message)


def build(config: ChannelConfig, context: AdapterContext) -> TalkAdapter:
    """The adapter of one Talk bot (habakkuk.channels.platforms)."""
    return TalkAdapter(config, context.door, context.secret(config, "token_env"))
