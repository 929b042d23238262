"""Gemini's errors onto the router's classes.

The Gemini API answers errors with Google's JSON error object, both as an HTTP
error body and as an event inside a 200 stream:
`{"error": {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED",
"details": [...]}}`. The class comes from the canonical `status` name and the
HTTP code, refined by the message and the details: an invalid key is a 400
INVALID_ARGUMENT whose ErrorInfo reason is API_KEY_INVALID (auth), a free tier
that needs billing is FAILED_PRECONDITION (billing), a prompt over the model's
window is INVALID_ARGUMENT with a token-count message (context overflow). A
429's `RetryInfo.retryDelay` ("41s") says when to try again.

Every 429 message says "check your plan and billing details", so the billing
words other providers use mean nothing there: only a spent prepayment is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..provider import ErrorClass, ProviderError
from .errors import CONTEXT_MARKERS, parse_retry_after

# Token-limit messages ("The input token count (1200000) exceeds the maximum number of
# tokens allowed (1048576).") on top of the ones every provider shares.
CONTEXT_WORDS = (*CONTEXT_MARKERS, "input token count", "exceeds the maximum number of tokens")
# A 429 that waiting will not fix: the project's prepaid credits or spend cap are used up.
SPENT_WORDS = ("credits are depleted", "prepayment", "spend cap", "spending cap")
AUTH_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"})
AUTH_WORDS = ("api key not valid", "api key expired", "api_key_invalid")
# Canonical status names and the HTTP code each stands for, for a body without a code.
STATUS_CODES = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def error_object(body: Any) -> Mapping[str, Any] | None:
    """The `error` object of a Gemini error body (an object, or a list holding one)."""
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, Mapping):
        return None
    inner = body.get("error")
    return inner if isinstance(inner, Mapping) else None


def _details(error: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    details = error.get("details")
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, Mapping) and str(d.get("@type", "")).endswith(kind)]


def retry_delay(error: Mapping[str, Any]) -> float | None:
    """Seconds from the error's `google.rpc.RetryInfo` detail ("41s", "0.5s"), if any."""
    for detail in _details(error, "google.rpc.RetryInfo"):
        match = _DELAY.match(str(detail.get("retryDelay", "")))
        if match:
            return float(match.group(1))
    return None


def classify_error(status: int | None, error: Mapping[str, Any]) -> ErrorClass:
    """The class of a Gemini error object, with the HTTP status when there is one."""
    name = str(error.get("status") or "").upper()
    code = status if status is not None and status >= 400 else None
    if code is None:
        raw = error.get("code")
        code = raw if isinstance(raw, int) and raw >= 400 else STATUS_CODES.get(name)
    text = str(error.get("message") or "").lower()
    reasons = {str(d.get("reason", "")) for d in _details(error, "google.rpc.ErrorInfo")}
    if reasons & AUTH_REASONS or any(w in text for w in AUTH_WORDS):
        return "auth"
    if name in ("UNAUTHENTICATED", "PERMISSION_DENIED") or code in (401, 403):
        return "auth"
    if name == "RESOURCE_EXHAUSTED" or code == 429:
        return "billing" if any(w in text for w in SPENT_WORDS) else "rate_limit"
    if name == "FAILED_PRECONDITION" and "billing" in text:
        return "billing"
    if any(w in text for w in CONTEXT_WORDS) or code == 413:
        return "context_overflow"
    if name == "UNAVAILABLE" or code in (503, 529):
        return "overloaded"
    if code == 402:
        return "billing"
    if code == 408:
        return "network"
    if code is not None and 400 <= code < 500:
        return "bad_request"
    return "server"


def provider_error(
    status: int | None,
    body: Any,
    provider: str,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """The ProviderError of an error answer (`body` parsed JSON, or the raw text)."""
    error = error_object(body)
    if error is None:
        text = body if isinstance(body, str) else json.dumps(body) if body else ""
        error = {"message": text.strip()[:500] or f"HTTP {status}"}
    error_class = classify_error(status, error)
    message = str(error.get("message") or error.get("status") or f"HTTP {status}")
    retry_after = None
    if error_class in ("rate_limit", "overloaded"):
        retry_after = retry_delay(error)
        if retry_after is None:
            retry_after = parse_retry_after(headers)
    return ProviderError(
        error_class, message, status=status, retry_after=retry_after, provider=provider
    )
