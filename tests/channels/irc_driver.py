"""The person of the one-table test on IRC: alice, a client of a real ngircd, in a private
chat with the bot (tests/channels/platform_driver.py)."""

from __future__ import annotations

from habakkuk.channels.irc_format import plain
from tests.channels.ngircd_server import IrcPerson, Ngircd

BOT_NICK = "habakkuk"


class IrcDriver:
    """Alice, allowed by nick, talking to the bot on ngircd's plain port (no SASL: ngircd
    has no accounts)."""

    kind = "irc"
    has_buttons = False
    carries_files = False

    def __init__(self, server: Ngircd, person: IrcPerson):
        self.server = server
        self.person = person

    def channel_yaml(self, name: str) -> str:
        return (
            "type: irc\n"
            f"server: 127.0.0.1:{self.server.port}\n"
            "tls: false\n"
            "sasl: false\n"
            f"nick: {BOT_NICK}\n"
            f'allow_from: ["{self.person.nick}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {}

    async def say(self, text: str) -> None:
        self.person.say(BOT_NICK, text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        raise AssertionError("IRC carries no files")

    async def press(self, label: str) -> None:
        raise AssertionError("IRC has no buttons: approvals are typed")

    def texts(self) -> list[str]:
        return [
            plain(text)
            for sender, target, text in self.person.got
            if sender == BOT_NICK and target == self.person.nick
        ]

    def files(self) -> list[tuple[str, bytes]]:
        return []
