"""Fixtures of the model adapter tests."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest


class _ClosingStream:
    """litellm's stream stand-in: iterating yields chunks; close() also closes the client."""

    def __init__(self, stream: Any, client: Any):
        self.stream, self.client = stream, client

    def __aiter__(self) -> Any:
        return self.stream.__aiter__()

    async def close(self) -> None:
        await self.stream.close()
        await self.client.close()


@pytest.fixture
def fake_litellm(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A `litellm` module whose acompletion speaks to the server through the openai SDK.

    litellm is an optional extra that is not installed here; this stand-in has
    the one function the adapter calls, with litellm's parameter names.
    """
    import openai

    calls: list[dict[str, Any]] = []

    async def acompletion(**params: Any) -> Any:
        calls.append(dict(params))
        client = openai.AsyncOpenAI(
            base_url=params.pop("api_base"), api_key=params.pop("api_key"), max_retries=0
        )
        for litellm_only in ("num_retries", "max_retries"):
            params.pop(litellm_only)
        params["model"] = params["model"].removeprefix("openai/")
        return _ClosingStream(await client.chat.completions.create(**params), client)

    module = types.ModuleType("litellm")
    module.acompletion = acompletion  # type: ignore[attr-defined]  # a stand-in litellm
    monkeypatch.setitem(sys.modules, "litellm", module)
    return calls
