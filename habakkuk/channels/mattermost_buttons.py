"""Mattermost's interactive message buttons: what a prompt's post carries, and how a press
the Mattermost server sends us is read and checked.

A post with buttons carries them in `props.attachments[].actions[]`, each
`{"id", "type": "button", "name", "integration": {"url", "context"}}`. When someone
presses one, the Mattermost server POSTs JSON to the integration URL: who pressed
(`user_id`, `user_name`), where (`channel_id`, `post_id`), a `trigger_id` of its own and
the button's `context`, which the server keeps to itself (clients never see an action's
integration). Our answer (`{"ephemeral_text": ...}`) is shown to the presser alone.

The URL is `<http.public_url or the server's own address>/channels/<account>/<secret>`
(the secret kept in the account's state file, compared in constant time), and each
button's context is signed: `sig` is HMAC-SHA256, under a key kept beside the secret,
over the button's data (`fy|<nonce>|<index>`) and the channel it was posted to. So a
request that did not come from a button we posted, to the channel we posted it in, is
refused whatever its body says.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .adapter import Button


@dataclass(frozen=True)
class Press:
    """One button press, checked: who pressed which button on which post."""

    user_id: str
    channel_id: str
    post_id: str
    trigger_id: str
    data: str  # the button's data: fy|<nonce>|<index>

    @property
    def nonce(self) -> str:
        """The prompt's nonce (the data's middle part)."""
        parts = self.data.split("|")
        return parts[1] if len(parts) == 3 else self.data


def signature(key: str, data: str, channel: str) -> str:
    """The context signature of a button carrying `data` posted to `channel`."""
    message = f"{data}|{channel}".encode()
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def attachments(
    buttons: list[list[Button]], url: str, key: str, channel: str
) -> list[dict[str, Any]]:
    """A post's `props.attachments` holding `buttons` (one attachment, its rows in order):
    each calls `url` with its data, the channel and their signature as its context."""
    actions: list[dict[str, Any]] = []
    for row in buttons:
        for button in row:
            context = {
                "data": button.data,
                "channel": channel,
                "sig": signature(key, button.data, channel),
            }
            actions.append(
                {
                    # Mattermost routes a press by the action's id: letters and digits only
                    "id": "".join(c for c in button.data if c.isalnum()),
                    "type": "button",
                    "name": button.text,
                    "integration": {"url": url, "context": context},
                }
            )
    return [{"text": "", "actions": actions}]


def read_press(body: bytes, key: str) -> Press | None:
    """The press in a request's JSON body when its context carries a valid signature for
    the channel it came from; None for anything else (truncated, forged, moved)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or not key:
        return None
    context = payload.get("context")
    if not isinstance(context, dict):
        return None
    data, channel, sig = context.get("data"), context.get("channel"), context.get("sig")
    if not (isinstance(data, str) and isinstance(channel, str) and isinstance(sig, str)):
        return None
    if not hmac.compare_digest(sig.encode(), signature(key, data, channel).encode()):
        return None
    fields = [payload.get(name) for name in ("user_id", "channel_id", "post_id")]
    if not all(isinstance(value, str) and value for value in fields):
        return None
    user_id, channel_id, post_id = (str(value) for value in fields)
    if channel_id != channel:  # a signed context pasted into a press elsewhere
        return None
    return Press(user_id, channel_id, post_id, str(payload.get("trigger_id") or ""), data)


def reachable(our_url: str, server_url: str) -> bool:
    """Whether a Mattermost server at `server_url` can call us at `our_url`: not when we
    are known only by a loopback address and the server is on another machine."""
    return not _loopback(our_url) or _loopback(server_url)


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
