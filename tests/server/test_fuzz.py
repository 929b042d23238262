"""A deterministic fuzz pass: malformed bodies, queries and headers on every endpoint.

Whatever arrives, the answer is a 2xx or a 4xx/501 with a JSON error, never a 500.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import mock_config

WEIRD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**70,
    1e308,
    -0.0,
    "",
    " ",
    "x" * 5000,
    "\u0000",
    "\ud800",  # a lone surrogate survives json.loads and breaks naive encoders
    "../../etc/passwd",
    "/new",
    "yes",
    "<script>alert(1)</script>",
    "habakkuk/main",
    "main",
    [],
    [1, "a", None],
    {},
    {"type": "text"},
    {"a": {"b": {"c": [{}]}}},
    [[[[[[[[[[]]]]]]]]]],
    [{"type": "image_url", "image_url": {"url": "data:"}}],
    [{"type": "text", "text": 5}],
    [{"role": "tool", "content": "x"}],
]

RAW_BODIES = [
    b"",
    b"{",
    b"null",
    b"[]",
    b"123",
    b'"str"',
    b"\xff\xfe\x00",
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b'{"conversation": "c", "text": "hi"',
    b"{}" * 1000,
    json.dumps({"x": "y" * 100}).encode() * 3,
]

VALID: dict[str, dict[str, Any]] = {
    "/api/chat": {"conversation": "fuzz", "text": "hello", "agent": "main", "id": "m1"},
    "/api/approvals/apr_x": {"approve": True},
    "/v1/chat/completions": {
        "model": "habakkuk/main",
        "messages": [{"role": "user", "content": "hi"}],
        "user": "u",
    },
    "/v1/responses": {"model": "habakkuk/main", "input": "hi", "previous_response_id": "resp_x"},
    "/hooks/plain": {"title": "t"},
}

GET_PATHS = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/api/app",
    "/api/overview",
    "/api/sessions?limit={v}",
    "/api/sessions?q={v}",
    "/api/sessions?agent={v}",
    "/api/sessions/{v}",
    "/api/sessions/{v}/export",
    "/api/usage?days={v}",
    "/api/usage?agent={v}",
    "/api/approvals",
    "/api/config",
    "/api/chat/conversations?limit={v}",
    "/v1/models",
    "/app/{v}",
]

QUERY_VALUES = [
    "",
    "-1",
    "0",
    "abc",
    "99999999999999999999",
    "%00",
    "%ff",
    "..%2F..",
    "[x]",
    "a" * 300,
]


def bodies(rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """(path, raw body) pairs: each valid body with one field broken, plus raw garbage."""
    for path, valid in VALID.items():
        for raw in RAW_BODIES:
            yield path, raw
        for key in valid:
            for value in WEIRD_VALUES:
                body = dict(valid)
                body[key] = value
                yield path, json.dumps(body).encode()
            missing = {k: v for k, v in valid.items() if k != key}
            yield path, json.dumps(missing).encode()
        extra = dict(valid)
        extra[rng.choice(["tools", "stream", "unknown", "instructions", "input"])] = rng.choice(
            WEIRD_VALUES
        )
        yield path, json.dumps(extra).encode()


def assert_not_500(status: int, text: str, where: str) -> None:
    assert status != 500, f"{where}: 500 {text[:300]}"
    assert status < 500 or status in (501, 503), f"{where}: {status} {text[:300]}"


@pytest.mark.timeout(300)
async def test_no_endpoint_answers_500_to_malformed_input(serve: Any) -> None:
    served = await serve(
        mock_config(extra="http:\n  hooks:\n    plain: {prompt: 'Ping {{.title}}'}\n")
    )
    rng = random.Random(20261130)
    headers = served.auth(**{"Content-Type": "application/json"})
    for path, raw in bodies(rng):
        extra = {}
        if path.startswith("/v1/"):
            extra = {
                rng.choice(["Idempotency-Key", "X-Habakkuk-Session"]): rng.choice(
                    ["", "k", "ses_missing", "x" * 300]
                )
            }
        async with served.client.post(
            served.url + path, data=raw, headers={**headers, **extra}
        ) as response:
            assert_not_500(response.status, await response.text(), f"POST {path} {raw[:80]!r}")
    for template in GET_PATHS:
        for value in QUERY_VALUES if "{v}" in template else [""]:
            path = template.replace("{v}", value)
            async with served.client.get(served.url + path, headers=served.auth()) as response:
                assert_not_500(response.status, await response.text(), f"GET {path}")
    for value in ["abc", "-5", "1" * 40, " "]:
        async with served.client.get(
            served.url + "/api/chat/fuzz/events",
            headers=served.auth(**{"Last-Event-ID": value}),
        ) as response:
            assert response.status in (200, 400), value
    for ctype in ("multipart/form-data", "multipart/form-data; boundary=zz", "text/plain"):
        async with served.client.post(
            served.url + "/api/chat",
            data=b'--zz\r\nContent-Disposition: form-data; name="text"\r\n\r\nhi\r\n--zz--\r\n'
            if "boundary" in ctype
            else b"garbage",
            headers=served.auth(**{"Content-Type": ctype, "X-Habakkuk-Client": "fuzz"}),
        ) as response:
            assert_not_500(response.status, await response.text(), f"multipart {ctype}")
    async with served.client.get(served.url + "/healthz") as response:
        assert response.status == 200
