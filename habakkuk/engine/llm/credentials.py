"""Keys resolved before each attempt: a ProviderSource that has a `token` for a model
(a subscription login, engine/llm/logins) hands the router that token in place of a
fixed key, refreshed when due. Its failures are ProviderErrors like a call's: auth
(fall back down the chain) or network (retry)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..config import ModelRef


@runtime_checkable
class TokenSource(Protocol):
    """A source whose keys may come from a token function."""

    async def token(self, ref: ModelRef) -> str | None:
        """The token for the next attempt on `ref`; None: use the source's key."""
        ...


async def resolve_key(source: object, ref: ModelRef, key: str | None) -> str | None:
    """The key one attempt on `ref` sends: the source's token where it has one, else `key`."""
    if isinstance(source, TokenSource):
        token = await source.token(ref)
        if token is not None:
            return token
    return key
