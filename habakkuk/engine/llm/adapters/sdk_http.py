"""The HTTP client the openai SDK's clients send through: aiohttp, or httpx2's own.

A process that serves (`serve`, the terminal app, the MCP server) makes many calls: its
clients send through the SDK's aiohttp client (`DefaultAioHttpClient`), whose C parser
costs about half what httpx2's pure-Python transport does per call. A one-shot
`habakkuk run` makes a few calls and then exits: importing aiohttp's client stack (and
the two certificate contexts aiohttp builds as it loads) costs it more than all its calls
save, so it sends through httpx2's own transport (`DefaultAsyncHttpxClient`, the SDK's
default). Either way the SDK raises the same exception types (it maps aiohttp's errors
onto httpx2's), retries stay off (the router retries) and the certificate context is the
one the SDK would make (tls_context.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tls_context import default_tls_context

if TYPE_CHECKING:
    import httpx2

_ONE_SHOT = [False]  # set once, by a process that makes a few calls and exits


def send_one_shot() -> None:
    """Send this process's model calls through httpx2's own transport (`habakkuk run`):
    clients made from here on leave aiohttp unloaded."""
    _ONE_SHOT[0] = True


def sdk_http_client(timeout: float) -> httpx2.AsyncClient:
    """A new HTTP client for an AsyncOpenAI client: aiohttp's unless send_one_shot."""
    import openai

    tls = default_tls_context()
    make = openai.DefaultAsyncHttpxClient if _ONE_SHOT[0] else openai.DefaultAioHttpClient
    return make(timeout=timeout) if tls is None else make(timeout=timeout, verify=tls)
