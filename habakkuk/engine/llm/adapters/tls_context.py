"""The TLS context the openai SDK's aiohttp client would make, without httpcore2's import.

`openai.DefaultAioHttpClient` sends through aiohttp, yet builds its certificate context
with `httpx2.create_ssl_context`, which imports httpcore2 (httpx2's own HTTP/1.1 and
HTTP/2 engine, with h11, h2 and its connection pools: a tenth of a second of a one-shot
`habakkuk run`) only to call `httpcore2.default_ssl_context`. Handed a context as
`verify`, the SDK uses it as it is; with httpcore2's package deferred (lazy_types.py) the
engine then never loads. The context is httpcore2's own function's: the same trust
(SSL_CERT_FILE, SSL_CERT_DIR, the compiled-in paths, truststore on Windows and macOS).

`httpcore2._ssl` is a private module: httpcore2 is pinned exactly in pyproject.toml, and
tests/llm/test_sdk_imports.py fails when the function moves. Where it cannot be found,
None: the SDK makes its context itself, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl


def default_tls_context() -> ssl.SSLContext | None:
    """httpcore2's default context (what the SDK's client would make), or None when the
    function is not where this pin has it."""
    try:
        from httpcore2._ssl import default_ssl_context
    except ImportError:
        return None
    return default_ssl_context()
