"""Provider adapters: one module per wire API, each exposing `create(provider_config)`.

The SDKs are imported inside the adapter modules' functions, never when
habakkuk is imported. Helpers shared by the adapters live here and import
nothing heavy.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..provider import ProviderError
from ..types import DocumentBlock, ImageBlock

log = logging.getLogger(__name__)

C = TypeVar("C")

# Keys for servers that need none (local servers); the SDKs refuse an empty key.
KEYLESS = "habakkuk-no-key"


class ClientCache(Generic[C]):
    """One SDK client per (base_url, api_key), created on first use and reused.

    Reuse keeps each client's connection pool warm; a new key (rotation) gets
    its own client so no request ever goes out with a stale credential.

    A client may be made on a worker thread ahead of its first call (the provider's
    `warm`): one lock makes each client once, and a call that needs the client
    meanwhile waits for that one (making it is what the call would do anyway).
    """

    def __init__(self, factory: Callable[[str | None, str], C]):
        self._factory = factory
        self._clients: dict[tuple[str | None, str], C] = {}
        self._making = threading.Lock()

    def get(self, base_url: str | None, api_key: str) -> C:
        """The client for this URL and key."""
        key = (base_url, api_key)
        client = self._clients.get(key)
        if client is None:
            with self._making:
                client = self._clients.get(key)
                if client is None:
                    client = self._factory(base_url, api_key)
                    self._clients[key] = client
        return client

    def __len__(self) -> int:
        return len(self._clients)

    async def aclose(self) -> None:
        """Close every client's connection pool."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            close = getattr(client, "close", None)
            if close is None:
                continue
            try:
                result = close()
                if hasattr(result, "__await__"):
                    await result
            except Exception as exc:  # a failing close must not hide the real shutdown
                log.debug("closing a model client failed: %s", exc)


def require_key(api_key: str | None, provider: str, keyless_ok: bool) -> str:
    """The key to send: the given one, a placeholder for keyless servers, or an auth error."""
    if api_key:
        return api_key
    if keyless_ok:
        return KEYLESS
    raise ProviderError(
        "auth",
        f"no API key is set (see providers.{provider}.key_env; `habakkuk setup` stores one)",
        provider=provider,
    )


def blob_path(blob: str) -> Path:
    """Where a block's blob lives: an absolute path, or a name inside HOME/blobs."""
    path = Path(blob).expanduser()
    if path.is_absolute():
        return path
    from ...home import default_home

    root = default_home() / "blobs"
    nested = root / blob[:2] / blob
    return nested if nested.exists() else root / blob


def read_blob(block: ImageBlock | DocumentBlock) -> bytes:
    """The bytes of a media block; a clear error when the blob is gone."""
    if not block.blob:
        raise ProviderError("bad_request", f"{block.type} block has no blob")
    path = blob_path(block.blob)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ProviderError(
            "bad_request", f"cannot read {block.type} {path}: {exc.strerror or exc}"
        ) from None


def blob_base64(block: ImageBlock | DocumentBlock) -> str:
    """The block's bytes as base64 text."""
    return base64.b64encode(read_blob(block)).decode("ascii")


def data_url(block: ImageBlock | DocumentBlock) -> str:
    """A `data:` URL of the block's bytes (the OpenAI APIs take media this way)."""
    return f"data:{block.media_type};base64,{blob_base64(block)}"


def is_text_media(media_type: str) -> bool:
    """Documents every API can take as plain text."""
    return media_type.startswith("text/") or media_type in (
        "application/json",
        "application/xml",
        "application/x-yaml",
    )


def has_media(messages: list[Any]) -> bool:
    """Whether building the request reads blob files (then it runs off the event loop)."""
    return any(
        isinstance(block, ImageBlock | DocumentBlock)
        for message in messages
        for block in message.blocks
    )


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments as a dict; malformed JSON is kept so the model sees its mistake."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_invalid_json": raw}
    return value if isinstance(value, dict) else {"_value": value}
