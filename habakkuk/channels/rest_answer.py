"""How a chat server's REST answer becomes the error the delivery worker needs, for the
servers that answer in plain HTTP statuses (Mattermost, Rocket.Chat): 401 is a refused
token (the account stops), 429 a rate limit (retried when the server says), 413 a file over
the upload limit, 400/403/404 a message that cannot be delivered, and any other status not
counted a success is a failure to retry."""

from __future__ import annotations

from collections.abc import Collection

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable, Unsupported


def check_answer(
    status: int,
    what: str,
    *,
    platform: str,
    refused: str,
    retry_after: str,
    detail: str,
    ok: Collection[int] = (200,),
) -> None:
    """Raise what answer `status` to call `what` means; return when it is a success.
    `refused` is the sentence for a refused token, `detail` the answer's own words."""
    if status == 401:
        raise FatalAdapterError(refused)
    if status == 429:
        raise RetryAfter(f"{what}: {platform}'s rate limit", retry_seconds(retry_after))
    if status == 413:
        raise Unsupported(f"{what}: over the server's upload limit (HTTP 413)")
    if status in (400, 403, 404):
        raise Undeliverable(f"{what}: HTTP {status}: {detail[:200]}")
    if status not in ok:
        raise SendError(f"{what}: HTTP {status}")


def retry_seconds(value: str) -> float:
    """A Retry-After header in seconds (a second when absent, not a number of seconds, or
    an hour or more away)."""
    try:
        seconds = float(value)
    except ValueError:
        return 1.0
    return seconds if 0 < seconds < 3600 else 1.0
