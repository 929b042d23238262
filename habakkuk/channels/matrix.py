"""Matrix through the client-server API over aiohttp (no matrix-nio; see matrix_api.py).

- `/sync` long polling with a filter (matrix_events.sync_filter); the `next_batch`
  position is saved in control.db after each batch was handed to the gateway, so a
  crash replays at most one batch, which the gateway drops as seen (a message's id is
  its event id). The first start (no saved position) syncs once with timeout=0 to take
  the current position and answers nothing already there.
- Invites are joined when the inviter is allowed (allow_from holds Matrix ids, or a
  paired user), else rejected.
- A room of two members is a private chat; a bigger one is a group, where the bot
  answers a mention (its id or display name, m.mentions) or a reply to itself. A thread
  (rel_type m.thread) is its own conversation; replies go into it.
- Every send is a PUT with a transaction id derived from the delivery job and the chunk
  (deliveries.SENDING), so a send retried after a crash is deduplicated by the
  homeserver instead of posted twice.
- End-to-end encryption is out of scope: an encrypted room gets one plain notice saying
  so, remembered in the account's state file (channels/matrix-<account>.json).
- Room and event ids hold colons, which an Address cannot: chats and threads are written
  with `%3A` (matrix_events.encode_id).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import mimetypes
import re
import uuid
from pathlib import Path
from typing import Any

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import write_private_file

from .adapter import (
    Adapter,
    Address,
    Attachment,
    Beat,
    Button,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    RetryAfter,
    SendError,
    Undeliverable,
    Unsupported,
)
from .deliveries import SENDING
from .format_matrix import render_chunks, text_content
from .matrix_api import MatrixClient, MatrixRefused, path
from .matrix_events import (
    FILE_TYPES,
    Invite,
    Message,
    RoomUpdate,
    SyncBatch,
    decode_id,
    encode_id,
    parse_sync,
    sync_filter,
    without_reply_fallback,
)
from .matrix_setup import SETUP, api_root, check_setup
from .platforms import AdapterContext
from .store import ChannelStore

__all__ = ["SETUP", "MatrixAdapter", "build", "check_setup"]

log = logging.getLogger(__name__)

ENCRYPTED_NOTICE = (
    "I can't read encrypted rooms (end-to-end encryption is not supported), so I will "
    "not see messages here. Talk to me in a room without encryption."
)
FILE_KINDS = {"m.image": "photo", "m.file": "document", "m.audio": "audio", "m.video": "video"}
TEXT_TYPES = frozenset({"m.text", "m.emote"})  # m.notice is what bots send: never answered


class MatrixAdapter(Adapter):
    """One Matrix account (a bot user with an access token)."""

    type = "matrix"
    keyed_sends = True  # every send's transaction id derives from the delivery (_txn)
    capabilities: frozenset[Capability] = frozenset(
        {"edit", "typing", "reactions", "files", "download"}
    )
    # what a file sent may weigh (homeservers commonly accept 50 MB uploads; a smaller
    # limit answers M_TOO_LARGE, which the chat is told about)
    max_file_bytes = 50 * 1024 * 1024

    def __init__(self, config: ChannelConfig, token: str, store: ChannelStore, state: Path):
        super().__init__(config.name)
        self.config = config
        self.store = store
        self.state_path = state
        self.api = MatrixClient(api_root(config), token)
        self.user_id = config.user_id or ""
        self.display_name = ""
        self._members: dict[str, int] = {}
        # The last events sent this run (a reply to one addresses us; an edit of a notice
        # keeps its type) and our reaction on each message: bounded, as the run is long.
        self._own_events: dict[str, bool] = {}  # event -> sent as m.notice
        self._reactions: dict[str, str] = {}  # message event -> our reaction's event

    async def close(self) -> None:
        await self.api.close()

    # -- receiving ---------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        me = await self.api.request("GET", "/account/whoami")
        if str(me.get("user_id", "")) != self.user_id:
            raise FatalAdapterError(
                f"channels.{self.account}.user_id: the token belongs to "
                f"{me.get('user_id', '?')}, not {self.user_id}"
            )
        with contextlib.suppress(MatrixRefused):  # no display name set
            profile = await self.api.request("GET", f"/profile/{path(self.user_id)}/displayname")
            self.display_name = str(profile.get("displayname") or "")
        since = await self.store.offset(self.account)
        if not since:
            # First start: take the current position; what is already there stays unanswered
            # (pending invites are still answered: they would never come again).
            first = await self._sync(None, 0)
            await self._invites(first.invites)
            since = first.next_batch
            await self.store.save_offset(self.account, since)
        # Up once it listens from a position: a message sent from now on is answered.
        beat()
        while True:
            try:
                batch = await self._sync(since, self.config.poll_timeout * 1000)
            except RetryAfter as exc:
                beat()  # the server answered: it is there, asking us to wait
                await asyncio.sleep(exc.seconds)
                continue
            beat()
            await self._invites(batch.invites)
            for room in batch.rooms:
                await self._room(room, inbox, beat)
            if batch.next_batch and batch.next_batch != since:
                since = batch.next_batch
                await self.store.save_offset(self.account, since)

    async def _sync(self, since: str | None, timeout_ms: int) -> SyncBatch:
        query = {
            "timeout": str(timeout_ms),
            "filter": json.dumps(sync_filter(self.user_id), separators=(",", ":")),
            "set_presence": "offline",
        }
        if since:
            query["since"] = since
        body = await self.api.request(
            "GET", "/sync", query=query, timeout=timeout_ms / 1000 + 15, what="sync"
        )
        return parse_sync(body, self.user_id)

    async def _invites(self, invites: list[Invite]) -> None:
        for invite in invites:
            allowed = await self._allowed(invite.inviter)
            try:
                if allowed:
                    await self.api.request("POST", f"/join/{path(invite.room)}", {})
                else:
                    await self.api.request(
                        "POST",
                        f"/rooms/{path(invite.room)}/leave",
                        {"reason": "not allowed to invite this bot"},
                    )
            except MatrixRefused as exc:  # withdrawn meanwhile, or the room is gone
                log.info("matrix %s: invite to %s: %s", self.account, invite.room, exc)
            self._members.pop(invite.room, None)

    async def _allowed(self, user: str) -> bool:
        if self.config.allow_all or user.lower() in (a.lower() for a in self.config.allowed):
            return True
        return await self.store.allowed_user(self.account, user) is not None

    async def _room(self, room: RoomUpdate, inbox: Inbox, beat: Beat) -> None:
        if room.joined_count is not None:
            self._members[room.room] = room.joined_count
        elif room.members_changed:
            self._members.pop(room.room, None)
        if room.encrypted:
            await self._encrypted(room.room)
        for message in room.messages:
            inbound = await self.convert(message)
            if inbound is not None:
                await inbox(inbound)
                beat()

    async def convert(self, message: Message) -> InboundMessage | None:
        """A room message as an InboundMessage (None for what the bot does not answer:
        notices, edits, kinds it does not read)."""
        if message.edit or not (message.msgtype in TEXT_TYPES or message.msgtype in FILE_TYPES):
            return None
        attachments: list[Attachment] = []
        text = without_reply_fallback(message.body)
        if message.msgtype in FILE_TYPES:
            name = message.filename or message.body or "file"
            # Matrix 1.10 captions: with a filename beside it, the body is the caption.
            text = message.body if message.filename and message.body != message.filename else ""
            kind = "voice" if message.voice else FILE_KINDS[message.msgtype]
            media_type = message.mimetype or mimetypes.guess_type(name)[0] or ""
            attachment = Attachment(
                kind,  # type: ignore[arg-type]  # one of FILE_KINDS' values or "voice"
                message.url,
                name,
                media_type or "application/octet-stream",
                message.size,
            )
            attachments.append(attachment)
        is_group = await self._member_count(message.room) > 2
        return InboundMessage(
            channel=self.account,
            chat=encode_id(message.room),
            message_id=message.event_id,
            sender=message.sender,
            sender_name=message.sender,
            text=self._strip_mention(text),
            thread=encode_id(message.thread) if message.thread else "",
            is_group=is_group,
            addressed=not is_group or await self._addressed(message, text),
            attachments=attachments,
            at=message.ts / 1000,
        )

    async def _member_count(self, room: str) -> int:
        if room not in self._members:
            try:
                answer = await self.api.request("GET", f"/rooms/{path(room)}/joined_members")
            except MatrixRefused:  # left meanwhile: unknown size counts as a group (mention)
                return 3
            joined = answer.get("joined")
            self._members[room] = len(joined) if isinstance(joined, dict) else 0
        return self._members[room]

    async def _addressed(self, message: Message, text: str) -> bool:
        """In a group: a mention (m.mentions, the id or display name), a reply to one of
        our messages, or a command."""
        if self.user_id in message.mentions or self.user_id in message.formatted_body:
            return True
        lowered = text.lower()
        if self.user_id.lower() in lowered or text.startswith("/"):
            return True
        if self.display_name and re.search(
            rf"(?<!\w){re.escape(self.display_name.lower())}(?!\w)", lowered
        ):
            return True
        if not message.reply_to:
            return False
        if message.reply_to in self._own_events:
            return True
        try:
            event = await self.api.request(
                "GET", f"/rooms/{path(message.room)}/event/{path(message.reply_to)}"
            )
        except MatrixRefused:  # redacted or not visible to us: not a reply to us
            return False
        return event.get("sender") == self.user_id

    def _strip_mention(self, text: str) -> str:
        """The text without a leading "Bot:" / "@bot:server," address."""
        names = [re.escape(self.user_id)]
        if self.display_name:
            names.append(re.escape(self.display_name))
        pattern = rf"^\s*(?:{'|'.join(names)})\s*[:,]?\s*"
        return re.sub(pattern, "", text, flags=re.IGNORECASE).strip()

    # -- encrypted rooms -----------------------------------------------------------------

    def _noticed(self) -> set[str]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        rooms = data.get("encrypted_noticed") if isinstance(data, dict) else None
        return {str(r) for r in rooms} if isinstance(rooms, list) else set()

    async def _encrypted(self, room: str) -> None:
        """Tell an encrypted room once that the bot cannot read it (remembered on disk)."""
        noticed = await asyncio.to_thread(self._noticed)
        if room in noticed:
            return
        content = {"msgtype": "m.notice", "body": ENCRYPTED_NOTICE, "m.mentions": {}}
        # The txn id derives from the room: a crash before the state file is written
        # resends the same transaction, which the homeserver does not post twice.
        txn = _txn_of("e2ee-notice", room)
        try:
            await self._send_event(room, "m.room.message", content, txn)
        except Undeliverable as exc:  # not allowed to post there: nothing to tell
            log.info("matrix %s: encrypted room %s: %s", self.account, room, exc)
        noticed.add(room)
        text = json.dumps({"encrypted_noticed": sorted(noticed)}, indent=1)
        await asyncio.to_thread(write_private_file, self.state_path, text)

    # -- sending -------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return render_chunks(markdown)

    def _txn(self, kind: str) -> str:
        """The transaction id of this send: derived from the delivery job and its chunk
        (a retry resends the same one), or unique outside a delivery (progress drafts)."""
        sending = SENDING.get()
        if sending is None:
            return f"hk{uuid.uuid4().hex}"
        return _txn_of(kind, sending.job, str(sending.chunk))

    async def _send_event(self, room: str, kind: str, content: dict[str, Any], txn: str) -> str:
        answer = await self.api.request(
            "PUT",
            f"/rooms/{path(room)}/send/{path(kind)}/{path(txn)}",
            content,
            what=f"send {kind}",
        )
        event_id = str(answer.get("event_id", ""))
        if not event_id:
            raise SendError(f"send {kind}: no event_id in the answer")
        _remember(self._own_events, event_id, content.get("msgtype") == "m.notice")
        return event_id

    @staticmethod
    def _relation(to: Address, reply_to: str | None) -> dict[str, Any]:
        if to.thread:
            root = decode_id(to.thread)
            return {
                "m.relates_to": {
                    "rel_type": "m.thread",
                    "event_id": root,
                    "is_falling_back": not reply_to,
                    "m.in_reply_to": {"event_id": reply_to or root},
                }
            }
        if reply_to:
            return {"m.relates_to": {"m.in_reply_to": {"event_id": reply_to}}}
        return {}

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        # Never pings anyone the text names (an empty m.mentions); a silent draft is a notice.
        content: dict[str, Any] = {**text_content(chunk, notice=silent), "m.mentions": {}}
        content |= self._relation(to, reply_to)
        event_id = await self._send_event(
            decode_id(to.chat), "m.room.message", content, self._txn("text")
        )
        return event_id

    async def edit_text(
        self, to: Address, message_id: str, chunk: str, buttons: list[list[Button]] | None = None
    ) -> None:
        new = text_content(chunk, notice=self._own_events.get(message_id, False))
        content = {
            "msgtype": new["msgtype"],
            "body": f"* {new['body']}",
            "format": new["format"],
            "formatted_body": f"* {new['formatted_body']}",
            "m.new_content": {**new, "m.mentions": {}},
            "m.mentions": {},
            "m.relates_to": {"rel_type": "m.replace", "event_id": message_id},
        }
        await self._send_event(decode_id(to.chat), "m.room.message", content, self._txn("edit"))

    async def delete(self, to: Address, message_id: str) -> None:
        room = decode_id(to.chat)
        await self.api.request(
            "PUT",
            f"/rooms/{path(room)}/redact/{path(message_id)}/{path(self._txn('redact'))}",
            {},
            what="redact",
        )

    async def typing(self, to: Address) -> None:
        room = decode_id(to.chat)
        await self.api.request(
            "PUT",
            f"/rooms/{path(room)}/typing/{path(self.user_id)}",
            {"typing": True, "timeout": 6000},
            what="typing",
        )

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:
        previous = self._reactions.pop(message_id, None)
        if previous is not None:
            with contextlib.suppress(Undeliverable):  # already gone
                await self.delete(to, previous)
        if emoji:
            content: dict[str, Any] = {
                "m.relates_to": {"rel_type": "m.annotation", "event_id": message_id, "key": emoji}
            }
            txn = f"hk{uuid.uuid4().hex}"
            event_id = await self._send_event(decode_id(to.chat), "m.reaction", content, txn)
            _remember(self._reactions, message_id, event_id)

    async def download(self, attachment: Attachment) -> bytes:
        return await self.api.download(attachment.file_id, self.max_file_bytes)

    async def send_voice(
        self,
        to: Address,
        path: Path,
        *,
        duration: float | None = None,
        caption: str = "",
        name: str = "",
    ) -> str:
        """An m.audio with info.duration (milliseconds) marked as a voice message
        (MSC3245), which Element shows as one."""
        return await self.send_file(to, path, caption=caption, name=name, duration=duration)

    async def send_file(
        self,
        to: Address,
        path_: Path,
        *,
        caption: str = "",
        name: str = "",
        duration: float | None = None,
    ) -> str:
        name = name or path_.name
        size = await asyncio.to_thread(lambda: path_.stat().st_size)
        if size > self.max_file_bytes:
            raise Unsupported(f"{name} is over {self.max_file_bytes // (1024 * 1024)} MB")
        data = await asyncio.to_thread(path_.read_bytes)
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        try:
            uri = await self.api.upload(data, name, media_type)
        except MatrixRefused as exc:
            if exc.code == "M_TOO_LARGE" or exc.status == 413:
                raise Unsupported(str(exc)) from None  # this file; the room is reachable
            raise
        major = media_type.split("/")[0]
        msgtype = {"image": "m.image", "audio": "m.audio", "video": "m.video"}.get(major, "m.file")
        content: dict[str, Any] = {
            "msgtype": msgtype,
            "body": caption.strip() or name,
            "filename": name,
            "url": uri,
            "info": {"mimetype": media_type, "size": len(data)},
            "m.mentions": {},
        }
        if duration is not None and msgtype == "m.audio":
            content["info"]["duration"] = round(duration * 1000)
            content["org.matrix.msc1767.audio"] = {"duration": round(duration * 1000)}
            content["org.matrix.msc3245.voice"] = {}
        content |= self._relation(to, None)
        return await self._send_event(
            decode_id(to.chat), "m.room.message", content, self._txn("file")
        )


REMEMBERED = 1000  # events kept in each of the adapter's memories


def _remember(memory: dict[str, Any], key: str, value: Any) -> None:
    """Note `key` in a bounded memory (the oldest entry goes past REMEMBERED)."""
    memory[key] = value
    if len(memory) > REMEMBERED:
        del memory[next(iter(memory))]


def _txn_of(*parts: str) -> str:
    return "hk" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:40]


def build(config: ChannelConfig, context: AdapterContext) -> MatrixAdapter:
    """The adapter of one Matrix account (habakkuk.channels.platforms)."""
    token = context.secret(config, "token_env")
    return MatrixAdapter(config, token, context.store, context.state_path(config))
