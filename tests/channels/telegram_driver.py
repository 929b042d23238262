"""The Telegram side of the one-table test: `TelegramDriver` plays the allowed person in a
private chat with the bot through the fake Bot API (tests/channels/fake_telegram.py)."""

from __future__ import annotations

import html
import re

from tests.channels.fake_telegram import FakeTelegram

_TAG = re.compile(r"<[^>]+>")


class TelegramDriver:
    """One allowed person (user and chat 42) talking to the bot on the fake Bot API."""

    kind = "telegram"
    has_buttons = True

    def __init__(self, tg: FakeTelegram, chat: int = 42):
        self.tg = tg
        self.chat = chat
        self._files = 0

    def channel_yaml(self, name: str) -> str:
        return (
            "type: telegram\n"
            "token_env: TG_TOKEN\n"
            f"base_url: {self.tg.base_url}\n"
            f'allow_from: ["{self.chat}"]\n'
            "poll_timeout: 1\n"
            "silent_limit: 20s\n"
        )

    def env(self) -> dict[str, str]:
        return {"TG_TOKEN": self.tg.token}

    async def say(self, text: str) -> None:
        self.tg.message(text, chat=self.chat, user=self.chat)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        self._files += 1
        file_id = f"DOC{self._files}"
        self.tg.add_file(file_id, data, f"documents/file_{self._files}")
        document = {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_name": name,
            "mime_type": media_type,
            "file_size": len(data),
        }
        extra = {"caption": caption} if caption else {}
        self.tg.message(chat=self.chat, user=self.chat, document=document, **extra)

    async def press(self, label: str) -> None:
        # The newest message of the chat that still has buttons (answered ones lose theirs).
        for (chat, message_id), message in sorted(self.tg.messages.items(), reverse=True):
            markup = message.get("reply_markup")
            if chat != self.chat or not markup:
                continue
            for row in markup["inline_keyboard"]:
                for button in row:
                    if button["text"] == label:
                        self.tg.press(
                            button["callback_data"], message_id=message_id, chat=chat, user=chat
                        )
                        return
            raise AssertionError(f"no button {label!r} on the newest prompt: {markup}")
        raise AssertionError("no message with buttons in the chat")

    def texts(self) -> list[str]:
        return [html.unescape(_TAG.sub("", text)) for text in self.tg.texts(self.chat)]

    def files(self) -> list[tuple[str, bytes]]:
        return [(name, data) for chat, name, data in self.tg.sent_files if chat == self.chat]
