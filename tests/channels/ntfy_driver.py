"""The person of the one-table test on ntfy: whoever publishes to the topic the bot reads,
subscribed to the topic it replies to, on the fake ntfy server."""

from __future__ import annotations

from tests.channels.fake_ntfy import FakeNtfy

REPLIES, INBOX = "hk-replies-7f3a", "hk-inbox-c91d"


class NtfyDriver:
    """The person on the fake ntfy (the topic is the gate: allow_from "*")."""

    kind = "ntfy"
    has_buttons = False

    def __init__(self, fake: FakeNtfy):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            "type: ntfy\n"
            f"base_url: {self.fake.base_url}\n"
            f"topic: {REPLIES}\n"
            f"listen: {INBOX}\n"
            'allow_from: ["*"]\n'
        )

    def env(self) -> dict[str, str]:
        return {}

    async def say(self, text: str) -> None:
        self.fake.store(INBOX, text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        self.fake.store(INBOX, caption or f"You received a file: {name}", (name, media_type, data))

    async def press(self, label: str) -> None:
        raise AssertionError("ntfy has no buttons: approvals are typed")

    def texts(self) -> list[str]:
        return [m.message for m in self.fake.of(REPLIES) if m.file is None]

    def files(self) -> list[tuple[str, bytes]]:
        return [(m.file[0], m.file[2]) for m in self.fake.of(REPLIES) if m.file is not None]
