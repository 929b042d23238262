"""Bedrock's errors onto the router's classes, by exception name.

Before the stream, an error is an HTTP status with the exception's name in the
`x-amzn-ErrorType` header (or `__type` in the JSON body, possibly with a namespace
before `#` and a URL after `:`) and `{"message": ...}`. Inside the stream, an
exception is an event-stream message with `:message-type: exception` and the name
in `:exception-type` (lower camel case there: `throttlingException`), and no status
at all; the spec gives each name its status (ThrottlingException 429,
ServiceUnavailableException overloaded), so both paths go through one table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..provider import ErrorClass, ProviderError
from .errors import BILLING_MARKERS, CONTEXT_MARKERS, classify_status, parse_retry_after

# Lower-cased exception name -> (class, the HTTP status it stands for).
NAMED: dict[str, tuple[ErrorClass, int]] = {
    "throttlingexception": ("rate_limit", 429),
    "toomanyrequestsexception": ("rate_limit", 429),
    "servicequotaexceededexception": ("rate_limit", 429),
    "serviceunavailableexception": ("overloaded", 503),
    "modelnotreadyexception": ("overloaded", 429),
    "internalserverexception": ("server", 500),
    "modelstreamerrorexception": ("server", 424),
    "modelerrorexception": ("server", 424),
    "modeltimeoutexception": ("network", 408),
    "accessdeniedexception": ("auth", 403),
    "unrecognizedclientexception": ("auth", 403),
    "expiredtokenexception": ("auth", 403),
    "invalidsignatureexception": ("auth", 403),
    "incompletesignatureexception": ("auth", 403),
    "missingauthenticationtokenexception": ("auth", 403),
    "resourcenotfoundexception": ("bad_request", 404),
    "validationexception": ("bad_request", 400),
}
# What a ValidationException says when the prompt (or the output asked for) does not fit.
BEDROCK_CONTEXT_MARKERS = (*CONTEXT_MARKERS, "too long", "max tokens", "maximum tokens")
# Marketplace models refuse access until a payment method is on the account.
BEDROCK_BILLING_MARKERS = (*BILLING_MARKERS, "payment instrument")


def exception_name(raw: str) -> str:
    """The bare name of `x-amzn-ErrorType` / `__type` ("ns#Name:url" -> "Name")."""
    name = raw.split(":", 1)[0]
    return name.rsplit("#", 1)[-1].strip()


def named_error(
    name: str,
    message: str,
    *,
    provider: str,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    original_status: int | None = None,
) -> ProviderError:
    """The ProviderError of exception `name` (HTTP `status` when it came with one)."""
    key = name.lower()
    text = message.lower()
    known = NAMED.get(key)
    if known is None:
        error_class = classify_status(status, err_type=name, message=message)
        code = status
    else:
        error_class, code = known
        if status is not None:
            code = status
    if key in ("validationexception", "modelstreamerrorexception", "modelerrorexception"):
        if any(marker in text for marker in BEDROCK_CONTEXT_MARKERS):
            error_class = "context_overflow"
        elif original_status == 429:
            error_class = "rate_limit"
    if error_class == "auth" and any(marker in text for marker in BEDROCK_BILLING_MARKERS):
        error_class = "billing"
    retry_after = None
    if error_class in ("rate_limit", "overloaded") and headers is not None:
        retry_after = parse_retry_after(headers)
    said = f"{name}: {message}" if name and message else (message or name or "error")
    return ProviderError(error_class, said, status=code, retry_after=retry_after, provider=provider)


def _body_fields(body: bytes) -> tuple[str, str]:
    """(`__type`, message) of an error body; the text itself when it is not JSON."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        return "", body.decode("utf-8", "replace").strip()[:500]
    if not isinstance(data, dict):
        return "", str(data)[:500]
    message = data.get("message") or data.get("Message") or ""
    return str(data.get("__type") or data.get("code") or ""), str(message)


def http_error(
    status: int, headers: Mapping[str, str], body: bytes, provider: str
) -> ProviderError:
    """The ProviderError of a non-200 answer to the request."""
    body_type, message = _body_fields(body)
    name = exception_name(headers.get("x-amzn-ErrorType") or body_type)
    if not message:
        message = f"HTTP {status}"
    return named_error(name, message, provider=provider, status=status, headers=headers)


def stream_error(headers: Mapping[str, Any], payload: bytes, provider: str) -> ProviderError:
    """The ProviderError of an exception (or error) message inside the event stream."""
    if headers.get(":message-type") == "error":
        # The event-stream protocol's own error: code and message in headers.
        name = str(headers.get(":error-code") or "")
        return named_error(name, str(headers.get(":error-message") or name), provider=provider)
    name = str(headers.get(":exception-type") or "")
    try:
        data: Any = json.loads(payload) if payload else {}
    except ValueError:
        data = {"message": payload.decode("utf-8", "replace")}
    if not isinstance(data, dict):
        data = {}
    message = str(data.get("message") or data.get("Message") or data.get("originalMessage") or "")
    original = data.get("originalStatusCode")
    if data.get("originalMessage") and data.get("originalMessage") != message:
        message = f"{message} ({data['originalMessage']})"
    return named_error(
        name,
        message,
        provider=provider,
        original_status=original if isinstance(original, int) else None,
    )
