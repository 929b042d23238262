"""Twitch chat: its IRC interface (irc.chat.twitch.tv:6697, TLS), the IRC adapter with
Twitch's login and tags.

- Login: `PASS oauth:<token>` (a user access token with chat:read and chat:edit), the
  bot's login name as NICK, and `CAP REQ :twitch.tv/tags twitch.tv/commands` without
  `CAP LS` (Twitch lists nothing). A refused token is a NOTICE "Login authentication
  failed": FatalAdapterError.
- In: PRIVMSGs in the channels of `join:` (a group chat each: Twitch chat has no private
  messages over IRC). The sender is the login name (Twitch's accounts: no one else can
  take it), with `id:<user-id>` and the display name as aliases. The `id` tag is the
  message's id, kept by Twitch when it resends, `tmi-sent-ts` its time. Addressed: a
  line starting with or naming `@bot`, or a `!command`.
- Out: one PRIVMSG per line (Twitch cuts at 500 characters; our lines are shorter),
  the first answering a message as a reply (`reply-parent-msg-id`), paced at 20 lines
  in 30 seconds, Twitch's limit for a bot that is not a moderator.
- RECONNECT (Twitch is about to restart the server) closes the connection, which ends
  the run as a dropped one does: the supervisor connects again.
"""

from __future__ import annotations

import uuid

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import Address, Button, FatalAdapterError, InboundMessage, SendError
from .irc import IrcAdapter, server_time
from .irc_conn import IrcConnection
from .irc_wire import Line, split_text, text_budget
from .platforms import AdapterContext
from .twitch_setup import SETUP as SETUP  # the registry reads a platform's step here
from .twitch_setup import twitch_login


class TwitchAdapter(IrcAdapter):
    """One Twitch bot account in its channels' chats."""

    type = "twitch"

    async def _on_line(self, conn: IrcConnection, line: Line) -> InboundMessage | None:
        if line.command == "RECONNECT":  # end the read: the run returns, to start again
            conn.writer.close()
            return None
        if line.command == "NOTICE" and line.param(0) != "*":
            reason = line.tags.get("msg-id", "")
            if reason in ("msg_banned", "msg_channel_suspended"):
                raise FatalAdapterError(f"Twitch refused {line.param(0)}: {line.param(1)}")
        return await super()._on_line(conn, line)

    def _message_id(self, line: Line) -> str:
        return line.tags.get("id", "") or super()._message_id(line)

    def convert(self, conn: IrcConnection, line: Line) -> InboundMessage | None:
        message = super().convert(conn, line)
        if message is None:
            return None
        aliases = list(message.sender_aliases)
        user_id = line.tags.get("user-id", "")
        display = line.tags.get("display-name", "")
        if user_id:
            aliases.append(f"id:{user_id}")
        if display and display.lower() != message.sender:
            aliases.append(display)
        message.sender_aliases = aliases
        message.sender_name = display or message.sender
        sent = line.tags.get("tmi-sent-ts", "")
        if sent.isdigit():
            message.at = int(sent) / 1000
        else:
            message.at = server_time(line.tags)
        return message

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        conn = self.conn
        if conn is None:
            raise SendError("not connected to Twitch chat")
        budget = min(text_budget(conn.nick, conn.user, conn.host, "PRIVMSG", to.chat), 500)
        tags = {"reply-parent-msg-id": reply_to} if reply_to else None
        for piece in split_text(chunk, budget) or ["…"]:
            await conn.send("PRIVMSG", to.chat, piece, tags=tags)
            tags = None  # only the first line answers the message
        return uuid.uuid4().hex[:16]  # IRC names no message we send: ours, for the record


def build(config: ChannelConfig, context: AdapterContext) -> TwitchAdapter:
    """The adapter of one Twitch bot account (habakkuk.channels.platforms)."""
    token = context.secret(config, "token_env")
    return TwitchAdapter(config, twitch_login(config, token))
