"""Instagram direct messages of a professional account: Messenger's Send API and webhooks
(habakkuk/channels/messenger.py) with Instagram's own webhook object, and files offered by
URL.

- In: the `instagram` webhook object, otherwise as Messenger (the chat is the person's
  Instagram-scoped id, IGSID). Inbound media come as CDN URLs without a file name, so a
  file is saved under its message id with its type's suffix.
- Out: plain text in chunks under 1000 characters (Instagram's limit); approvals as quick
  replies; a file is offered to Meta under a one-hour unguessable URL served from memory
  (habakkuk/channels/webhook.py), which it fetches, as Instagram takes attachments by URL.
"""

from __future__ import annotations

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import Address
from .format import html_to_plain, markdown_chunks
from .messenger import MessengerAdapter, secrets_of
from .messenger_setup import INSTAGRAM_SETUP
from .metagraph import GraphClient
from .platforms import AdapterContext

INSTAGRAM_LIMIT = 1000  # a message's longest text
_SEND_KINDS = {"image": "image", "video": "video", "audio": "audio"}


class InstagramAdapter(MessengerAdapter):
    """One Instagram professional account's direct messages."""

    type = "instagram"
    webhook_object = "instagram"

    def render(self, markdown: str) -> list[str]:
        return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, INSTAGRAM_LIMIT)]

    async def send_attachment(self, to: Address, name: str, data: bytes, media_type: str) -> str:
        """The file by a one-hour URL Meta fetches (Instagram takes attachments by URL)."""
        kind = _SEND_KINDS.get(media_type.partition("/")[0], "file")
        url = self.media_url(data, media_type)
        message = {"attachment": {"type": kind, "payload": {"url": url}}}
        return await self._send(to, {"message": message})


def build(config: ChannelConfig, context: AdapterContext) -> InstagramAdapter:
    """The adapter of one Instagram account (habakkuk.channels.platforms)."""
    graph = GraphClient(context.secret(config, "token_env"), config.base_url or "")
    return InstagramAdapter(config, context.door, graph, secrets_of(config, context))


SETUP = INSTAGRAM_SETUP
