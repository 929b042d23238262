"""Map SDK exceptions and HTTP statuses onto the router's error classes.

Shared by every adapter. The mapping is duck-typed (status code, response
headers, error body, class names) so it works the same for the anthropic and
openai SDKs, litellm's subclasses of openai's exceptions, and the raw httpx /
httpx2 transport errors a cut stream can let escape, without importing any of
them here.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from typing import Any

from ..provider import ErrorClass, ProviderError

# Messages that mean "the prompt does not fit", across providers and gateways.
CONTEXT_MARKERS: tuple[str, ...] = (
    "prompt is too long",
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context length",
    "too many tokens",
    "input is too long",
    "exceeds the maximum number of tokens",
    "token limit",
)
BILLING_MARKERS: tuple[str, ...] = (
    "insufficient_quota",
    "credit balance",
    "billing",
    "exceeded your current quota",
    "payment required",
)
# Error `type` values in Anthropic-style bodies (they also arrive inside a 200 stream).
_TYPE_CLASSES: dict[str, ErrorClass] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "billing",
    "insufficient_quota": "billing",
    "api_error": "server",
    "timeout_error": "server",
    "server_error": "server",
    "not_found_error": "bad_request",
    "invalid_request_error": "bad_request",
    "request_too_large": "context_overflow",
}
# Codes of OpenAI-style error bodies and of Responses `response.failed` errors.
_CODE_CLASSES: dict[str, ErrorClass] = {
    "context_length_exceeded": "context_overflow",
    "insufficient_quota": "billing",
    "billing_hard_limit_reached": "billing",
    "rate_limit_exceeded": "rate_limit",
    "server_overloaded": "overloaded",
    "server_error": "server",
    "invalid_api_key": "auth",
    "invalid_prompt": "bad_request",
}
_NETWORK_CLASS_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "TransportError",
        "TimeoutException",
        "NetworkError",
        "ProtocolError",
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "ConnectError",
        "ReadTimeout",
        "ConnectTimeout",
        "PoolTimeout",
        "ServerDisconnectedError",
        "ClientConnectionError",
        "IncompleteRead",
        "StreamClosed",
    }
)


def parse_retry_after(headers: Mapping[str, str] | Any, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        value = headers.get("retry-after")
    except AttributeError:
        return None
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(type, code, message) of an error body in either API's shape."""
    if not isinstance(body, Mapping):
        return "", "", str(body) if body else ""
    inner = body.get("error", body)
    if not isinstance(inner, Mapping):
        return "", "", str(inner)
    err_type = inner.get("type") or ""
    code = inner.get("code") or ""
    message = inner.get("message") or ""
    return str(err_type), str(code), str(message)


def classify_status(
    status: int | None,
    *,
    err_type: str = "",
    code: str = "",
    message: str = "",
) -> ErrorClass:
    """The error class of an HTTP status plus the body's type, code and message."""
    text = f"{err_type} {code} {message}".lower()
    if status == 429:
        # OpenAI answers a spent quota with 429 too; waiting will not fix that.
        return "billing" if any(m in text for m in BILLING_MARKERS) else "rate_limit"
    if any(marker in text for marker in CONTEXT_MARKERS):
        return "context_overflow"
    if err_type == "overloaded_error" or code == "server_overloaded" or status in (503, 529):
        return "overloaded"
    if any(marker in text for marker in BILLING_MARKERS) or status == 402:
        return "billing"
    if status in (401, 403):
        return "auth"
    if status == 413:
        return "context_overflow"
    if status == 408:
        return "network"
    if status is not None and status >= 500:
        return "server"
    if status is not None and 400 <= status < 500:
        return "bad_request"
    # No usable status (an error event inside a 200 stream): go by the body.
    by_code = _CODE_CLASSES.get(code)
    if by_code is not None:
        return by_code
    return _TYPE_CLASSES.get(err_type, "server")


def classify_code(code: str | None, message: str = "") -> ErrorClass:
    """The class of an error reported inside a stream with a code and no status."""
    return classify_status(None, code=code or "", err_type=code or "", message=message)


def _is_network(exc: BaseException) -> bool:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError, EOFError)):
        return True
    for cls in type(exc).__mro__:
        module = cls.__module__.split(".")[0]
        if cls.__name__ in _NETWORK_CLASS_NAMES and module in (
            "anthropic",
            "openai",
            "httpx",
            "httpx2",
            "httpcore",
            "httpcore2",
            "h11",
            "aiohttp",
            "litellm",
        ):
            return True
    return isinstance(exc, OSError)


def classify(exc: BaseException, provider: str = "") -> ProviderError | None:
    """A ProviderError for an SDK or transport exception; None when it is not one.

    None leaves programming errors (TypeError, KeyError, ...) to propagate as
    they are, rather than being retried as if the service had failed.
    """
    if isinstance(exc, ProviderError):
        if not exc.provider:
            exc.provider = provider
        return exc
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    body = getattr(exc, "body", None)
    err_type, code, message = _error_fields(body)
    # openai's APIError keeps code/type as attributes when the body was unwrapped.
    code = code or str(getattr(exc, "code", "") or "")
    err_type = err_type or str(getattr(exc, "type", "") or "")
    if status is None and response is None and body is None:
        if _is_network(exc):
            text = str(exc) or type(exc).__name__
            return ProviderError("network", text, provider=provider)
        if type(exc).__name__.endswith(("ConnectionError", "TimeoutError")):
            return ProviderError("network", str(exc) or type(exc).__name__, provider=provider)
        return None
    # A stream's error event comes with the 200 of the stream's response.
    effective = status if status is not None and status >= 400 else None
    error_class = classify_status(effective, err_type=err_type, code=code, message=message)
    text = message or getattr(exc, "message", "") or str(exc) or type(exc).__name__
    retry_after = None
    if error_class in ("rate_limit", "overloaded"):
        retry_after = parse_retry_after(headers)
    return ProviderError(
        error_class, text, status=status, retry_after=retry_after, provider=provider
    )


def as_provider_error(exc: BaseException, provider: str) -> BaseException:
    """`classify(exc)` or the exception itself, for `raise ... from exc`."""
    mapped = classify(exc, provider)
    return mapped if mapped is not None else exc
