"""The platform-neutral adapter interface and the normalized messages it exchanges.

An adapter speaks one platform. It receives (`run`: long polling, a socket or
webhooks handed to it) and converts each platform message into an
`InboundMessage` for the gateway; it formats and sends text out in chunks the
platform accepts. Optional abilities (editing, typing, buttons, reactions,
files, polls) are methods with a capability flag, so the gateway and the
delivery worker ask `adapter.can(...)` instead of knowing the platform.

Errors a send may raise tell the delivery worker what to do: `Undeliverable`
stops retrying (bot blocked, chat gone), `RetryAfter` and any other
`SendError` retry with backoff. `Unsupported` (an Undeliverable) says this one
part cannot go to this chat (a kind the adapter does not send, a file over its
limit): the worker tells the chat what could not be sent and why. `FatalAdapterError`
from `run` means retrying at once cannot help (a revoked token).

What an adapter can send is what it declares: text always; files with "files", native
polls with "polls" (without, a poll goes as numbered text). The delivery worker never
hands an adapter a part it did not declare, and never drops one in silence.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from habakkuk.engine.llm.types import Block

Capability = Literal["edit", "typing", "buttons", "reactions", "files", "polls", "download"]


class SendError(Exception):
    """A send failed; retrying later may work."""


class Undeliverable(SendError):
    """A send that can never succeed (bot blocked, chat gone): stop retrying."""


class Unsupported(Undeliverable):
    """This part cannot be sent to this chat (a kind the adapter does not have, a file over
    its limit); the chat itself is reachable, so it is told what was not sent and why."""


class RetryAfter(SendError):
    """The platform asked us to slow down for `seconds`."""

    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.seconds = seconds


class FatalAdapterError(Exception):
    """The adapter cannot work as configured (bad token); restarting soon will not help."""


@dataclass(frozen=True)
class Address:
    """Where a message goes: channel account, chat and optional thread.

    Written `CHANNEL:CHAT[:THREAD]` (chat ids may be negative numbers, never
    contain colons on the platforms we speak).
    """

    channel: str
    chat: str
    thread: str = ""

    @classmethod
    def parse(cls, text: str) -> Address:
        """Parse `CHANNEL:CHAT[:THREAD]`; ValueError when malformed."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(f"{text!r} is not CHANNEL:CHAT[:THREAD]")
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else "")

    @property
    def conversation(self) -> str:
        """The conversation key: a thread is its own conversation."""
        return str(self)

    def __str__(self) -> str:
        return f"{self.channel}:{self.chat}" + (f":{self.thread}" if self.thread else "")


@dataclass
class Attachment:
    """A file that came with a message, not yet downloaded."""

    kind: Literal["photo", "document", "voice", "audio", "video"]
    file_id: str
    name: str
    media_type: str
    size: int | None = None


@dataclass
class Callback:
    """A button press: `data` is what the button carried (fy|<nonce>|<index>)."""

    id: str
    data: str
    message_id: str


@dataclass
class InboundMessage:
    """One platform message (or button press) in the gateway's terms."""

    channel: str
    chat: str
    message_id: str
    sender: str
    text: str = ""
    thread: str = ""
    # other names the sender is known by, matched by allow_from (e.g. "@alice")
    sender_aliases: list[str] = field(default_factory=list)
    sender_name: str = ""
    is_group: bool = False
    # private chats always; in groups: a mention, a reply to the bot, a command
    addressed: bool = True
    attachments: list[Attachment] = field(default_factory=list)
    callback: Callback | None = None
    at: float = field(default_factory=time.time)
    # the job id of the turn this message starts, when the adapter derives its own
    # (the web chat keeps its `turn_<digest>` ids); else the gateway derives one
    turn_id: str = ""
    # content blocks the adapter already stored (the web chat's uploaded images and PDFs)
    blocks: list[Block] = field(default_factory=list)

    @property
    def address(self) -> Address:
        return Address(self.channel, self.chat, self.thread)

    @property
    def key(self) -> str:
        """What identifies this message on its platform (for redelivery checks)."""
        if self.callback is not None:
            return f"cb:{self.callback.id}"
        return f"{self.chat}:{self.message_id}"


@dataclass(frozen=True)
class Button:
    text: str
    data: str


Inbox = Callable[[InboundMessage], Awaitable[object]]
Beat = Callable[[], None]


class Adapter(ABC):
    """One connected channel account. Subclasses implement `run`, `render` and `send_text`."""

    type: str = ""
    capabilities: frozenset[Capability] = frozenset()
    max_file_bytes: int = 25 * 1024 * 1024
    # Whether every send inside a delivery carries a key derived from the delivery and its
    # part (deliveries.SENDING), so the platform drops a resend after a crash (Discord's
    # nonce, Matrix's transaction id, email's Message-ID); else the delivery worker writes
    # the start of each send first, and a resumed part is `Sending.attempted`.
    keyed_sends: bool = False

    def __init__(self, account: str):
        self.account = account

    def can(self, capability: Capability) -> bool:
        return capability in self.capabilities

    @abstractmethod
    async def run(self, inbox: Inbox, beat: Beat) -> None:
        """Receive until cancelled or broken; hand each message to `inbox`.

        Call `beat()` on every message and keepalive, so the supervisor can tell
        a live connection from a silent one. Return or raise when the
        connection is gone; the supervisor restarts the adapter.
        """

    @abstractmethod
    def render(self, markdown: str) -> list[str]:
        """Markdown to the platform's text format, in chunks it accepts (never empty)."""

    @abstractmethod
    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        """Send one rendered chunk; returns the platform's message id."""

    async def close(self) -> None:  # noqa: B027 - optional, a no-op where unsupported
        """Release connections (called after `run` ends and on shutdown)."""

    # -- optional abilities; each checked with can() first ------------------------

    async def edit_text(
        self, to: Address, message_id: str, chunk: str, buttons: list[list[Button]] | None = None
    ) -> None:
        """Replace a message's text ("edit")."""
        raise Undeliverable(f"{self.type} cannot edit messages")

    async def delete(self, to: Address, message_id: str) -> None:
        """Remove a message ("edit")."""
        raise Undeliverable(f"{self.type} cannot delete messages")

    async def strip_buttons(self, to: Address, message_id: str) -> None:  # noqa: B027 - optional, a no-op where unsupported
        """Remove a message's buttons ("buttons")."""

    async def answer_callback(self, callback: Callback, text: str = "") -> None:  # noqa: B027 - optional, a no-op where unsupported
        """Acknowledge a button press, optionally with a short notice ("buttons")."""

    async def typing(self, to: Address) -> None:  # noqa: B027 - optional, a no-op where unsupported
        """Show the typing indicator for a few seconds ("typing")."""

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:  # noqa: B027 - optional, a no-op where unsupported
        """Set (or with None clear) the bot's reaction on a message ("reactions")."""

    async def download(self, attachment: Attachment) -> bytes:
        """Fetch an attachment's bytes ("download")."""
        raise SendError(f"{self.type} cannot download attachments")

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        """Send a file ("files") shown as `name` (default: its file name); returns the id."""
        raise Unsupported(f"{self.type} chats cannot receive files")

    async def send_voice(
        self,
        to: Address,
        path: Path,
        *,
        duration: float | None = None,
        caption: str = "",
        name: str = "",
    ) -> str:
        """Post a voice note (Ogg Opus, `duration` seconds when known) where the platform
        has them; this default sends it as an audio file ("files")."""
        return await self.send_file(to, path, caption=caption, name=name)

    async def send_poll(
        self, to: Address, question: str, options: list[str], *, multiple: bool = False
    ) -> str:
        """Post a native poll ("polls"); returns the message id."""
        raise Unsupported(f"{self.type} chats have no native polls")


def poll_as_text(question: str, options: list[str], multiple: bool) -> str:
    """A poll written as a numbered list, for platforms without native polls."""
    lines = [f"**{question}**", ""]
    lines += [f"{i}. {option}" for i, option in enumerate(options, start=1)]
    lines += [
        "",
        "(reply with the numbers of your choices)" if multiple else "(reply with a number)",
    ]
    return "\n".join(lines)


AdapterFactory = Callable[[Any], Adapter]
