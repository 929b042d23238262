"""Error mapping details the fake server cannot provoke: stream error events, headers."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest

from habakkuk.engine.llm.adapters.errors import classify, classify_status, parse_retry_after


def _response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    return httpx2.Response(status, headers=headers or {}, request=request)


def test_anthropic_overloaded_error_event_inside_a_200_stream_is_overloaded() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    exc = anthropic.APIStatusError("Overloaded", response=_response(200), body=body)
    mapped = classify(exc, "anthropic")
    assert mapped is not None
    assert mapped.error_class == "overloaded"


def test_openai_error_chunk_mid_stream_maps_by_its_code() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    exc = openai.APIError(
        "slow down", request, body={"message": "slow down", "code": "rate_limit_exceeded"}
    )
    mapped = classify(exc, "openai")
    assert mapped is not None
    assert mapped.error_class == "rate_limit"


def test_retry_after_ms_wins_and_http_dates_are_understood() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after(
        {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0
    ) == (10.0)
    assert parse_retry_after({"retry-after": "soon"}) is None


def test_a_cut_stream_escaping_unwrapped_is_network() -> None:
    mapped = classify(httpx2.RemoteProtocolError("peer closed connection"), "anthropic")
    assert mapped is not None
    assert mapped.error_class == "network"


def test_programming_errors_are_not_classified() -> None:
    assert classify(KeyError("x"), "p") is None
    assert classify(TypeError("x"), "p") is None


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "prompt is too long: 300000 tokens > 200000 maximum", "context_overflow"),
        (400, "This model's maximum context length is 8192 tokens", "context_overflow"),
        (429, "You exceeded your current quota", "billing"),
        (429, "Too many requests", "rate_limit"),
        (413, "request too large", "context_overflow"),
        (504, "gateway timeout", "server"),
        (408, "request timeout", "network"),
    ],
)
def test_status_and_message_rules(status: int, message: str, expected: str) -> None:
    assert classify_status(status, message=message) == expected
