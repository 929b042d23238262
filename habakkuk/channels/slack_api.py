"""Slack's Web API over aiohttp: one POST per method, errors mapped for the delivery worker.

Every method is `POST <base_url>/<method>` with `Authorization: Bearer <token>` and a
JSON body (form-encoded for the few methods that take no JSON); the answer is
`{"ok": true, ...}` or `{"ok": false, "error": "<code>"}`. The codes map to what the
adapter's callers need:

- 429 (`ratelimited`): RetryAfter with the Retry-After header's seconds;
- a token Slack refuses (`invalid_auth`, `not_authed`, `account_inactive`,
  `token_revoked`, ...): FatalAdapterError, restarting soon cannot help;
- a chat that is gone or closed to us (`channel_not_found`, `is_archived`,
  `not_in_channel`, ...): Undeliverable, retrying cannot help either;
- a request Slack will never take (`msg_too_long`, `invalid_blocks`, ...): SlackRefused,
  an Undeliverable the adapter may turn into Unsupported for one file;
- anything else (5xx, a network error, `internal_error`): SendError, retried.

Tokens never appear in an error message: only the method and Slack's code do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable

DEFAULT_BASE_URL = "https://slack.com/api"

FATAL_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
        "team_access_not_granted",
        "ekm_access_denied",
    }
)
UNDELIVERABLE_ERRORS = frozenset(
    {
        "channel_not_found",
        "is_archived",
        "not_in_channel",
        "user_not_found",
        "user_not_visible",
        "cannot_dm_bot",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
        "restricted_action_non_threadable_channel",
        "team_not_found",
        "message_not_found",
        "cant_update_message",
        "cant_delete_message",
        "edit_window_closed",
        "thread_not_found",
    }
)
# Retrying sends the same request: Slack will refuse it again.
REFUSED_ERRORS = frozenset(
    {
        "msg_too_long",
        "no_text",
        "invalid_blocks",
        "invalid_blocks_format",
        "invalid_arguments",
        "invalid_arg_name",
        "too_many_attachments",
        "file_upload_size_restricted",
        "file_uploads_disabled",
        "file_uploads_except_images_disabled",
        "invalid_name",
        "already_reacted",
        "no_reaction",
        "invalid_name_required",
        "too_many_reactions",
        # a scope the app was not given: this call fails until the app is reinstalled
        "missing_scope",
        "no_permission",
    }
)


class SlackRefused(Undeliverable):
    """Slack refuses this request for good (the chat itself is reachable)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Identity:
    """Who a bot token belongs to (auth.test)."""

    team_id: str
    team: str
    user_id: str
    bot_id: str
    user: str


class WebApi:
    """The Web API with one token, on one aiohttp session the caller closes."""

    def __init__(self, base_url: str, token: str, session: aiohttp.ClientSession):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.session = session

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        form: bool = False,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """Call `method`; its answer (ok) or the mapped error."""
        headers = {"Authorization": f"Bearer {self.token}"}
        body: dict[str, Any] = {}
        if form:
            body["data"] = {k: _form_value(v) for k, v in (params or {}).items()}
        else:
            body["json"] = params or {}
        try:
            async with self.session.post(
                f"{self.base_url}/{method}",
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
                **body,
            ) as response:
                status = response.status
                retry_after = response.headers.get("Retry-After", "")
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{method}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        return _answer(method, status, retry_after, text)

    async def identity(self) -> Identity:
        """auth.test: the team and bot user the token belongs to."""
        me = await self.call("auth.test")
        return Identity(
            team_id=str(me.get("team_id", "")),
            team=str(me.get("team", "")),
            user_id=str(me.get("user_id", "")),
            bot_id=str(me.get("bot_id", "")),
            user=str(me.get("user", "")),
        )


def _form_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _answer(method: str, status: int, retry_after: str, text: str) -> dict[str, Any]:
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = None
    error = str(body.get("error", "")) if isinstance(body, dict) else ""
    if status == 429 or error == "ratelimited":
        try:
            seconds = float(retry_after)
        except ValueError:
            seconds = 30.0  # Slack always sends the header; a Tier 1 method's minute-ish
        raise RetryAfter(f"{method}: rate limited for {seconds:.0f}s", seconds)
    if not isinstance(body, dict):
        raise SendError(f"{method}: HTTP {status}: not a Web API answer")
    if body.get("ok"):
        return body
    error = error or f"HTTP {status}"
    message = f"{method}: {error}"
    if body.get("needed"):
        message += f" (the app needs the scope {body['needed']})"
    if error in FATAL_ERRORS:
        raise FatalAdapterError(message + " (check the Slack tokens)")
    if error in UNDELIVERABLE_ERRORS:
        raise Undeliverable(message)
    if error in REFUSED_ERRORS:
        raise SlackRefused(message, error)
    raise SendError(message)
