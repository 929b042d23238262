"""Hostile requests on the wire: every client mistake is a 4xx with a JSON error, never a 5xx.

Raw bytes go over a plain socket (aiohttp's client would refuse to send them):
JSON nested 10,000 deep, headers that are not UTF-8, Last-Event-ID values that are
not plain decimals, malformed Host headers, bad /v1 fields, wrong content types,
huge and invalid UTF-8 bodies, then a bounded random mutation pass with a fixed seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import random
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.engine.timeouts import wait_within
from tests.conftest import mock_config
from tests.server.conftest import TOKEN

HOOKS = """http:
  hooks:
    plain: {prompt: 'Ping {{.title}}'}
    signed: {prompt: 'Signed {{.Body}}', secret_env: HOOK_SECRET}
"""
POST_PATHS = [
    "/api/chat",
    "/api/approvals/apr_x",
    "/api/memory/main",
    "/api/memory-history/main/abcd/restore",
    "/v1/chat/completions",
    "/v1/responses",
    "/hooks/plain",
    "/hooks/signed",
]
GET_PATHS = [
    "/healthz",
    "/readyz",
    "/api/app",
    "/api/overview",
    "/api/sessions",
    "/api/approvals",
    "/api/config",
    "/api/usage",
    "/api/chat/conversations",
    "/api/memory/main",
    "/api/memory-history/main",
    "/api/memory-proposals/main",
    "/v1/models",
    "/app/",
    "/metrics",
]
VALID: dict[str, dict[str, Any]] = {
    "/api/chat": {"conversation": "fuzz", "text": "hello", "id": "m1"},
    "/api/approvals/apr_x": {"approve": True},
    "/api/memory/main": {"title": "Fuzz", "content": "x", "tags": ["f"]},
    "/api/memory-history/main/abcd/restore": {"version": "after"},
    "/v1/chat/completions": {
        "model": "habakkuk/main",
        "messages": [{"role": "user", "content": "hi"}],
    },
    "/v1/responses": {"model": "habakkuk/main", "input": "hi"},
    "/hooks/plain": {"title": "t"},
    "/hooks/signed": {"title": "t"},
}
DEEP = 10_000
HOOK_SECRET = "hook-secret-0123456789abcdef"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def send_raw(port: int, head: bytes, body: bytes = b"") -> Answer:
    """One request written byte for byte; the status, headers and (non-stream) body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + b"\r\n" + body)
        await writer.drain()
        raw = await wait_within(reader.readuntil(b"\r\n\r\n"), 30)
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        content = b""
        if "content-length" in headers:
            content = await wait_within(reader.readexactly(int(headers["content-length"])), 30)
        return Answer(status, headers, content)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, TimeoutError):
            await wait_within(writer.wait_closed(), 5)


def request_head(
    method: str, path: str, headers: list[tuple[bytes, bytes]], length: int | None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode()]
    names = {name.lower() for name, _ in headers}
    if b"host" not in names:
        lines.append(b"Host: 127.0.0.1")
    lines.extend(name + b": " + value for name, value in headers)
    if length is not None:
        lines.append(b"Content-Length: " + str(length).encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n"


async def call(
    served: Any,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    auth: bool = True,
    content_type: bytes | None = b"application/json",
) -> Answer:
    """A request with the token and a JSON content type unless told otherwise."""
    extra = list(headers or [])
    names = {name.lower() for name, _ in extra}
    if auth and served.token and b"authorization" not in names:
        extra.append((b"Authorization", f"Bearer {served.token}".encode()))
    if path == "/hooks/signed" and b"x-habakkuk-signature" not in names:
        digest = hmac.new(HOOK_SECRET.encode(), body or b"", hashlib.sha256).hexdigest()
        extra.append((b"X-Habakkuk-Signature", b"sha256=" + digest.encode()))
    if body is not None and content_type is not None and b"content-type" not in names:
        extra.append((b"Content-Type", content_type))
    head = request_head(method, path, extra, len(body) if body is not None else None)
    return await send_raw(served.server.port, head, body or b"")


def assert_client_error(answer: Answer, path: str, where: str, status: int | None = None) -> Any:
    """A 4xx (or the given status) with the path's JSON error shape; returns the error."""
    assert answer.status < 500, f"{where}: {answer.status} {answer.body[:300]!r}"
    assert answer.status >= 400, f"{where}: {answer.status} {answer.body[:300]!r}"
    if status is not None:
        assert answer.status == status, f"{where}: {answer.status} {answer.body[:300]!r}"
    assert answer.headers.get("content-type", "").startswith("application/json"), where
    error = answer.json()["error"]
    if path.startswith("/v1/"):
        assert set(error) >= {"message", "type", "param", "code"}, (where, error)
        assert isinstance(error["message"], str) and error["message"], where
    else:
        assert isinstance(error, str) and error, (where, error)
    return error


def assert_not_server_error(answer: Answer, path: str, where: str) -> None:
    assert answer.status < 500 or answer.status in (501, 503), (
        f"{where}: {answer.status} {answer.body[:300]!r}"
    )
    if answer.status >= 400:
        assert_client_error(answer, path, where, answer.status)


@pytest.fixture
async def hostile(serve: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    # Workers run what a mutation leaves valid, so a /v1 request gets its reply.
    return await serve(mock_config("- text: 'ok'", extra=HOOKS))


def nested(depth: int) -> list[bytes]:
    return [
        b"[" * depth + b"]" * depth,
        b'{"a":' * depth + b"1" + b"}" * depth,
        b'{"x": ' + b"[" * depth + b"]" * depth + b"}",
    ]


@pytest.mark.timeout(240)
async def test_json_nested_too_deep_is_a_400_on_every_endpoint(hostile: Any) -> None:
    for path in POST_PATHS:
        for raw in nested(DEEP):
            answer = await call(hostile, "POST", path, raw)
            assert_client_error(answer, path, f"POST {path} {raw[:20]!r}", 400)
    # Deep inside an otherwise valid body: the depth limit holds there too.
    for path, valid in VALID.items():
        key = next(iter(valid))
        body = dict(valid)
        body[key] = json.loads("[" * 200 + "]" * 200)
        answer = await call(hostile, "POST", path, json.dumps(body).encode())
        assert_client_error(answer, path, f"POST {path} {key} nested 200 deep", 400)


V1_HEADERS = [("POST", b"X-Habakkuk-Session"), ("POST", b"Idempotency-Key")]
NOT_UTF8 = [b"\xff\xfe", b"abc\xc3(", b"\xed\xa0\x80", b"Bearer \xff" + TOKEN.encode()]


@pytest.mark.timeout(120)
async def test_headers_that_are_not_utf8_are_a_400(hostile: Any) -> None:
    signed = json.dumps(VALID["/hooks/signed"]).encode()
    cases: list[tuple[str, str, bytes | None, bytes]] = [
        ("POST", "/api/chat", json.dumps(VALID["/api/chat"]).encode(), b"Authorization"),
        ("GET", "/api/app", None, b"Authorization"),
        ("GET", "/v1/models", None, b"Authorization"),
        ("POST", "/hooks/plain", signed, b"Authorization"),
        ("POST", "/hooks/signed", signed, b"Authorization"),
        ("POST", "/hooks/signed", signed, b"X-Habakkuk-Signature"),
        ("POST", "/hooks/signed", signed, b"X-Habakkuk-Delivery"),
        ("GET", "/api/chat/fuzz/events", None, b"Last-Event-ID"),
    ]
    for path in ("/v1/chat/completions", "/v1/responses"):
        v1_body = json.dumps(VALID[path]).encode()
        cases += [(m, path, v1_body, name) for m, name in V1_HEADERS]
    for method, path, body, name in cases:
        for value in NOT_UTF8:
            headers = [(name, value)]
            if path == "/hooks/signed" and name == b"Authorization":
                headers.append((b"X-Habakkuk-Signature", b""))  # the bearer secret is read
            answer = await call(hostile, method, path, body, headers)
            where = f"{method} {path} {name.decode()}: {value!r}"
            assert_client_error(answer, path, where, 400)


@pytest.mark.timeout(120)
async def test_other_undecodable_headers_are_never_a_server_error(hostile: Any) -> None:
    body = json.dumps(VALID["/api/chat"]).encode()
    for name in (b"Content-Type", b"Sec-Fetch-Site", b"X-Habakkuk-Client", b"Accept", b"Host"):
        for value in NOT_UTF8:
            answer = await call(hostile, "POST", "/api/chat", body, [(name, value)])
            assert_not_server_error(answer, "/api/chat", f"{name.decode()}: {value!r}")


BAD_CURSORS = [
    "-1",
    "1e3",
    "１２",
    "²",
    "99999999999999999999",
    "9223372036854775808",
    "0x10",
    "+5",
    "1_000",
    "5 5",
    "abc",
]


@pytest.mark.timeout(120)
async def test_a_cursor_that_is_not_a_plain_decimal_is_a_400_before_the_stream(
    hostile: Any,
) -> None:
    path = "/api/chat/fuzz/events"
    for value in BAD_CURSORS:
        answer = await call(hostile, "GET", path, headers=[(b"Last-Event-ID", value.encode())])
        assert_client_error(answer, path, f"Last-Event-ID {value!r}", 400)
        query = "".join(f"%{b:02X}" for b in value.encode())
        answer = await call(hostile, "GET", f"{path}?after={query}")
        assert_client_error(answer, path, f"?after={value!r}", 400)
    # The largest 64-bit value is a cursor (nothing after it yet): the stream starts.
    answer = await call(hostile, "GET", path, headers=[(b"Last-Event-ID", str(2**63 - 1).encode())])
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")


V1_BAD: list[tuple[str, str, Any]] = [
    ("/v1/chat/completions", "stream", "../.."),
    ("/v1/chat/completions", "stream", 1),
    ("/v1/chat/completions", "temperature", "hot"),
    ("/v1/chat/completions", "temperature", 3),
    ("/v1/chat/completions", "temperature", True),
    ("/v1/chat/completions", "top_p", 1.5),
    ("/v1/chat/completions", "max_tokens", 0),
    ("/v1/chat/completions", "max_tokens", 2.5),
    ("/v1/chat/completions", "max_completion_tokens", "10"),
    ("/v1/chat/completions", "n", 2),
    ("/v1/chat/completions", "stream_options", "yes"),
    ("/v1/chat/completions", "stream_options", {"include_usage": "yes"}),
    ("/v1/chat/completions", "store", "no"),
    ("/v1/chat/completions", "user", 5),
    ("/v1/chat/completions", "model", 5),
    ("/v1/chat/completions", "messages", "hi"),
    ("/v1/chat/completions", "messages", [{"role": "robot", "content": "hi"}]),
    ("/v1/chat/completions", "messages", [{"role": "user", "content": 5}]),
    ("/v1/chat/completions", "presence_penalty", 9),
    ("/v1/chat/completions", "stop", [1]),
    ("/v1/chat/completions", "metadata", []),
    ("/v1/responses", "stream", "../.."),
    ("/v1/responses", "store", "no"),
    ("/v1/responses", "temperature", -1),
    ("/v1/responses", "max_output_tokens", -5),
    ("/v1/responses", "instructions", 5),
    ("/v1/responses", "input", 5),
    ("/v1/responses", "previous_response_id", 5),
    ("/v1/responses", "metadata", {"k": 5}),
]


@pytest.mark.timeout(120)
async def test_bad_v1_fields_are_a_400_naming_the_field(hostile: Any) -> None:
    for path, name, value in V1_BAD:
        body = {**VALID[path], name: value}
        answer = await call(hostile, "POST", path, json.dumps(body).encode())
        error = assert_client_error(answer, path, f"{path} {name}={value!r}", 400)
        assert error["type"] == "invalid_request_error", error
        assert isinstance(error["param"], str), (name, error)
        assert error["param"].startswith(name), (name, error)


BAD_CONTENT_TYPES = [
    b"text/plain",
    b"application/x-www-form-urlencoded",
    b"multipart/form-data",
    b"application/json-patch+json",
    b"",
]


@pytest.mark.timeout(240)
async def test_bad_bodies_and_content_types_are_a_4xx_with_a_json_error(hostile: Any) -> None:
    bodies = [
        b"",
        b"null",
        b"[]",
        b'[{"a": 1}]',
        b"12",
        b'"text"',
        b"true",
        b'{"conversation": "c", "text": "\xff\xfe"}',
        b'\xef\xbb\xbf{"a": 1}',
        b'{"a": 1e400}',
        b'{"a": "\\ud800"}',
        b'{"a": NaN}',
        b"{" * 3,
    ]
    for path in POST_PATHS:
        for raw in bodies:
            answer = await call(hostile, "POST", path, raw)
            assert_not_server_error(answer, path, f"POST {path} {raw[:30]!r}")
        valid = json.dumps(VALID[path]).encode()
        for ctype in BAD_CONTENT_TYPES:
            answer = await call(hostile, "POST", path, valid, content_type=ctype)
            assert_not_server_error(answer, path, f"POST {path} Content-Type {ctype!r}")
        answer = await call(hostile, "POST", path, valid, content_type=None)
        assert_not_server_error(answer, path, f"POST {path} without a Content-Type")
    for path, size in (("/api/chat", 2), ("/v1/responses", 9), ("/hooks/plain", 2)):
        huge = b'{"x": "' + b"a" * (size * 1024 * 1024) + b'"}'
        answer = await call(hostile, "POST", path, huge)
        assert_client_error(answer, path, f"POST {path} {size} MB", 413)


HOSTS = [b"[::1", b"::1]", b"", b"local host", b"localhost:99999", b"localhost:abc"]
HOSTS += [b"[::1]x", b"127.0.0.1:", b"[::1]:", b"[zz]:80", b"127.0.0.1:80:80", b"\xff"]


@pytest.mark.timeout(120)
async def test_a_malformed_host_is_not_loopback(serve: Any) -> None:
    served = await serve(mock_config("- text: 'ok'"), token=False, workers=False)
    for host in HOSTS:
        for path in ("/api/app", "/v1/models", "/healthz", "/readyz"):
            answer = await call(served, "GET", path, headers=[(b"Host", host)])
            assert_client_error(answer, path, f"Host {host!r} {path}", 403)
    for host in (b"[::1]:8484", b"localhost", b"127.0.0.1:1", b"LOCALHOST:80"):
        answer = await call(served, "GET", "/api/app", headers=[(b"Host", host)])
        assert answer.status == 200, (host, answer)


@pytest.mark.timeout(120)
async def test_a_malformed_host_with_a_token_is_never_a_server_error(hostile: Any) -> None:
    for host in HOSTS:
        for path in GET_PATHS:
            answer = await call(hostile, "GET", path, headers=[(b"Host", host)])
            assert_not_server_error(answer, path, f"Host {host!r} {path}")


MUTATED_HEADERS = [b"Idempotency-Key", b"X-Habakkuk-Session", b"X-Habakkuk-Delivery"]
MUTATED_HEADERS += [b"X-Habakkuk-Signature", b"Last-Event-ID", b"Authorization"]


def mutate(rng: random.Random, raw: bytes) -> bytes:
    """One random edit of a body: a byte changed, a run inserted, cut, or a bracket burst."""
    data = bytearray(raw)
    choice = rng.randrange(6)
    at = rng.randrange(len(data) + 1)
    if choice == 0 and data:
        data[min(at, len(data) - 1)] = rng.randrange(256)
    elif choice == 1:
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    elif choice == 2:
        del data[at:]
    elif choice == 3:
        depth = rng.choice([65, 500, 3000])
        data[at:at] = b"[" * depth
    elif choice == 4:
        data[at:at] = rng.choice([b'"\\ud800"', b"null", b"[]", b"{}", b"1e999", b'"\xff"'])
    else:
        data[at:at] = b",".join([b'"k"'] * rng.randrange(1, 50))
    return bytes(data)


@pytest.mark.timeout(300)
async def test_random_mutations_of_valid_requests_never_get_a_server_error(
    hostile: Any,
) -> None:
    rng = random.Random(20261201)
    for _ in range(240):
        path = rng.choice(POST_PATHS)
        raw = mutate(rng, json.dumps(VALID[path]).encode())
        headers: list[tuple[bytes, bytes]] = []
        if rng.random() < 0.3:
            name = rng.choice(MUTATED_HEADERS)
            headers.append((name, rng.choice([b"\xff", b"k", b"x" * 300, b"ses_none"])))
        answer = await call(hostile, "POST", path, raw, headers)
        assert_not_server_error(answer, path, f"POST {path} {raw[:80]!r} {headers}")


ODD_PATHS = [b"%ff", b"%ed%a0%80", b"\xff", b"%00", b"a%2Fb", b"..", b"%C0%AF", b"x" * 300]


@pytest.mark.timeout(120)
async def test_odd_bytes_in_paths_and_queries_are_never_a_server_error(hostile: Any) -> None:
    port = hostile.server.port
    auth = f"Authorization: Bearer {TOKEN}".encode()
    templates = [
        b"/api/sessions/{v}",
        b"/api/sessions/{v}/export",
        b"/api/chat/{v}/events",
        b"/api/chat/{v}/live",
        b"/api/sessions?q={v}",
        b"/api/sessions?agent={v}",
        b"/api/usage?agent={v}",
        b"/api/chat/conversations?limit={v}",
        b"/app/{v}",
        b"/hooks/{v}",
    ]
    for template in templates:
        for value in ODD_PATHS:
            target = template.replace(b"{v}", value)
            method = b"POST" if target.startswith(b"/hooks/") else b"GET"
            head = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", auth]
            head += [b"Content-Length: 2", b"Content-Type: application/json"]
            head.append(b"Connection: close")
            answer = await send_raw(port, b"\r\n".join(head) + b"\r\n", b"{}")
            path = target.decode("latin-1")
            if answer.status == 200 and "event-stream" in answer.headers.get("content-type", ""):
                continue
            if value == b"\xff":
                # aiohttp's HTTP parser refuses the request line (plain text) before the app.
                assert answer.status == 400, (target, answer)
                continue
            assert_not_server_error(answer, path, f"{method.decode()} {path}")
