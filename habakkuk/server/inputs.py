"""Reading what a client sent: bodies, JSON, header text, cursors and query integers.

Every handler reads its input through these, so a client mistake is an ApiError
4xx decided before the handler acts (and before a stream starts), never an
exception that the conventions middleware would turn into a 500.

Every read of a request body has a size cap and a deadline (`body_deadline`: the
server's body_seconds, 30 s): a client that announces a chunk of 2^56 bytes and
never sends it gets a 408 instead of holding the connection and a handler for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from .errors import ApiError
from .served import SERVER_KEY

JSON_LIMIT = 8 * 1024 * 1024  # a /v1 request may carry a long history
MAX_DEPTH = 64
MAX_CURSOR = 2**63 - 1  # SQLite's largest integer
_DECIMAL = re.compile(r"[0-9]{1,19}")
_INTEGER = re.compile(r"-?[0-9]{1,19}")
_CHUNK = 64 * 1024
BODY_SECONDS = 30.0  # a whole request body arrives within this (HttpServer.body_seconds)


class TooDeep(ApiError):
    """A JSON document nested deeper than MAX_DEPTH."""

    def __init__(self) -> None:
        super().__init__(400, f"the JSON is nested deeper than {MAX_DEPTH} levels")


def body_seconds(request: web.Request) -> float:
    """How long the body of `request` may take to arrive (the server's body_seconds)."""
    server = request.app.get(SERVER_KEY)
    return float(getattr(server, "body_seconds", BODY_SECONDS))


@contextlib.asynccontextmanager
async def body_deadline(request: web.Request) -> AsyncIterator[None]:
    """Whatever is read of the request's body inside this block arrives within
    `body_seconds`; ApiError 408 otherwise (its answer closes the connection)."""
    seconds = body_seconds(request)
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {seconds:g} s") from None


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole request body; ApiError 413 when it is over `limit` bytes, 408 when it
    has not arrived within the server's body_seconds."""
    too_large = ApiError(413, f"request body is over {_size(limit)}")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    data = bytearray()
    try:
        async with body_deadline(request):
            # StreamReader.read(n) returns what has arrived, not n bytes: read to the end.
            while chunk := await request.content.read(_CHUNK):
                data.extend(chunk)
                if len(data) > limit:
                    raise too_large
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise ApiError(400, f"could not read the body: {exc}") from None
    return bytes(data)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit // 1024} KB"


def parse_json(raw: bytes) -> Any:
    """A JSON document from UTF-8 bytes; ApiError 400 for anything else.

    Refused: invalid UTF-8 or JSON, NaN and Infinity (also 1e400), nesting deeper
    than MAX_DEPTH (TooDeep) and lone surrogates (\\ud800 parses, but cannot be
    stored or sent as UTF-8).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise TooDeep() from None
    except ValueError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    _check_tree(value)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_tree(value: Any) -> None:
    """Depth, finite numbers and valid Unicode, walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > MAX_DEPTH:
                raise TooDeep()
            for key, child in item.items():
                _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                raise TooDeep()
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            _check_text(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ApiError(400, "the body has a number too large for JSON")


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "the body contains an unpaired surrogate (invalid Unicode)") from None


async def read_json(request: web.Request, *, limit: int = JSON_LIMIT) -> dict[str, Any]:
    """The request's JSON object body; ApiError 400/413 for anything else."""
    raw = await read_body(request, limit)
    if not raw.strip():
        raise ApiError(400, "the body is empty; send a JSON object ({} where nothing is needed)")
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def header(request: web.Request, name: str, *, limit: int | None = None) -> str:
    """A header's value as text without surrounding spaces ("" when absent).

    ApiError 400 when it is not UTF-8 (aiohttp hands such bytes over as lone
    surrogates, which cannot be compared, stored or hashed) or over `limit`.
    """
    value = request.headers.get(name, "")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"the {name} header is not valid UTF-8") from None
    value = value.strip()
    if limit is not None and len(value) > limit:
        raise ApiError(400, f"the {name} header is longer than {limit} characters")
    return value


def cursor(text: str, name: str) -> int:
    """A message sequence number: a plain ASCII decimal from 0 to 2^63-1."""
    if not _DECIMAL.fullmatch(text) or int(text) > MAX_CURSOR:
        raise ApiError(400, f"{name} must be a message sequence number (0 to {MAX_CURSOR})")
    return int(text)


def query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter (ASCII digits) within [low, high]; ApiError 400 otherwise."""
    text = request.query.get(name)
    if text is None or text == "":
        return default
    if not _INTEGER.fullmatch(text):
        raise ApiError(400, f"{name} must be an integer from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be between {low} and {high}")
    return value


def query_flag(request: web.Request, name: str) -> bool:
    """A yes/no query parameter: 1 or true, 0 or false (absent: no); ApiError 400 otherwise."""
    text = request.query.get(name, "").lower()
    if text in ("", "0", "false"):
        return False
    if text in ("1", "true"):
        return True
    raise ApiError(400, f"{name} must be 1 or 0")
