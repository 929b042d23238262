"""What a test of "the same conversation on every platform" needs from a platform's fake.

Each platform's fake (tests/channels/fake_<kind>.py) comes with a driver implementing
`PlatformDriver`: it plays the one allowed person in a private chat with the bot, and
reads back what the bot sent there, in the platform's own wire format decoded to text.
tests/channels/test_every_platform.py runs one table of conversations (/new, /stop, an
approval, a file each way) through every driver. The web chat has no fake: its driver
(tests/channels/web_driver.py) is the dashboard's page on the runtime's own server.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class PlatformDriver(Protocol):
    """One allowed person talking to the bot in a private chat on a fake platform."""

    kind: str  # the channel type: "telegram", "slack", ...
    has_buttons: bool  # approvals come with buttons the person can press

    def channel_yaml(self, name: str) -> str:
        """The body of `channels.<name>` (YAML, not indented) pointing at the fake, with
        `allow_from` naming this person."""
        ...

    def env(self) -> dict[str, str]:
        """The variables the channel entry names (tokens, passwords), with their values."""
        ...

    async def say(self, text: str) -> None:
        """The person sends `text` to the bot."""
        ...

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        """The person sends a file (with an optional caption) to the bot."""
        ...

    async def press(self, label: str) -> None:
        """The person presses the button labelled `label` on the newest message that has
        buttons (only when has_buttons)."""
        ...

    def texts(self) -> list[str]:
        """Every text the bot sent to the person, oldest first, as plain text."""
        ...

    def files(self) -> list[tuple[str, bytes]]:
        """Every file the bot sent to the person: (name, bytes), oldest first."""
        ...


@runtime_checkable
class WebhookDriver(Protocol):
    """A driver whose platform calls the bot (SMS through Twilio): the table starts the
    runtime's HTTP server on a free loopback port and points the fake at it."""

    def called_at(self, url: str) -> None:
        """The fake platform now calls `url` (`/channels/<account>` on our server)."""
        ...


@runtime_checkable
class ServedDriver(Protocol):
    """A driver whose person talks to the bot through the runtime's own HTTP server (the
    web chat): the table adds its `http:` section, then starts the server on a free
    loopback port and tells the driver where."""

    def config_yaml(self) -> str:
        """More of config.yaml (the `http:` section: its token)."""
        ...

    def served_at(self, url: str) -> None:
        """The runtime's HTTP server now listens at `url` (http://127.0.0.1:<port>)."""
        ...
