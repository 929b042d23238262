"""The person of the one-table test on Twitch: alice, the broadcaster, in her own channel's
chat with the bot, on the fake server speaking Twitch's IRC (tests/channels/fake_irc.py)."""

from __future__ import annotations

from habakkuk.channels.irc_format import plain
from tests.channels.fake_irc import FakeIrc

TWITCH_TOKEN = "abcdefghijklmnopqrstuvwxyz0123"
CHANNEL = "#alice"


class TwitchDriver:
    """Alice in #alice; the channel answers every message (`groups: all`): a streamer's
    own chat with the bot is the nearest Twitch has to a private chat."""

    kind = "twitch"
    has_buttons = False

    def __init__(self, fake: FakeIrc):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            "type: twitch\n"
            f"server: 127.0.0.1:{self.fake.port}\n"
            "tls: false\n"
            "nick: habakkuk\n"
            "token_env: TWITCH_TOKEN\n"
            f'join: ["{CHANNEL}"]\n'
            "groups: all\n"
            'allow_from: ["alice"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"TWITCH_TOKEN": TWITCH_TOKEN}

    async def say(self, text: str) -> None:
        self.fake.say(text, target=CHANNEL)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        raise AssertionError("Twitch chat carries no files")

    async def press(self, label: str) -> None:
        raise AssertionError("Twitch chat has no buttons: approvals are typed")

    def texts(self) -> list[str]:
        return [plain(text) for text in self.fake.texts(CHANNEL)]

    def files(self) -> list[tuple[str, bytes]]:
        return []
