"""Live mode's credentials: a short-lived client secret from the provider (spec 000
"Media": Live mode), minted with the `realtime:` key so the browser never sees it.

POST {base_url}/realtime/client_secrets with `expires_after` and a session of type
realtime: the model, the instructions, the voice of its audio output, the transcription
model of the user's speech, and one flat function tool, ask_habakkuk(request). The
answer's `value` and `expires_at` are what the page needs; its WebRTC offer goes to
{base_url}/realtime/calls with that value as the bearer token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from habakkuk.engine.http_read import read_upto

from .providers import Secrets, error_text

if TYPE_CHECKING:
    from habakkuk.engine.realtime_config import RealtimeConfig

TOOL_NAME = "ask_habakkuk"
REQUEST_SECONDS = 30.0
MAX_ANSWER_BYTES = 1024 * 1024
DEFAULT_INSTRUCTIONS = (
    "You are the voice of Habakkuk, the user's assistant. Keep answers short and spoken. "
    f"For anything about the user's work, files, board, schedules or memory, or anything "
    f"you cannot answer yourself, call {TOOL_NAME} with the user's request in their words "
    "and read its answer back. When it says Habakkuk needs approval, ask the user and call "
    f"{TOOL_NAME} again with yes or no."
)
TOOL_DESCRIPTION = (
    "Ask Habakkuk, the user's agent with their tools, files and memory, to do or answer "
    "something. Returns its reply, or a note that it needs the user's yes or no."
)


class RealtimeError(Exception):
    """Minting failed: `status` 503 when the key is not set, 502 when the provider
    refused or could not be reached (the message says why, in one line)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ClientSecret:
    """What the page needs for one call."""

    value: str
    expires_at: int  # epoch seconds
    calls_url: str
    model: str
    voice: str


def session_body(config: RealtimeConfig) -> dict[str, Any]:
    """The body of POST /realtime/client_secrets for `config`."""
    return {
        "expires_after": {"anchor": "created_at", "seconds": int(config.ttl_seconds)},
        "session": {
            "type": "realtime",
            "model": config.model,
            "instructions": config.instructions or DEFAULT_INSTRUCTIONS,
            "audio": {
                "input": {"transcription": {"model": config.transcription}},
                "output": {"voice": config.voice},
            },
            "tools": [
                {
                    "type": "function",
                    "name": TOOL_NAME,
                    "description": TOOL_DESCRIPTION,
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "request": {
                                "type": "string",
                                "description": "What the user wants, in their words.",
                            }
                        },
                        "required": ["request"],
                    },
                }
            ],
        },
    }


async def mint(config: RealtimeConfig, secrets: Secrets) -> ClientSecret:
    """A client secret for one call (RealtimeError when there is none to give)."""
    import aiohttp

    key = (secrets.get(config.key_env) or "").strip()
    if not key:
        raise RealtimeError(503, f"realtime: the API key variable {config.key_env} is not set")
    url = f"{config.base_url}/realtime/client_secrets"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_SECONDS)) as client,
            client.post(
                url, json=session_body(config), headers=headers, allow_redirects=False
            ) as response,
        ):
            data = await read_upto(response.content, MAX_ANSWER_BYTES)
            status = response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        why = str(exc)[:200] or type(exc).__name__
        raise RealtimeError(502, f"realtime: cannot reach {url}: {why}") from None
    if status >= 400:
        raise RealtimeError(502, f"realtime: the provider refused (HTTP {status}): "
                            f"{error_text(data)}")  # fmt: skip
    return _secret(config, data)


def _secret(config: RealtimeConfig, data: bytes) -> ClientSecret:
    import json

    try:
        answer: Any = json.loads(data)
    except ValueError:
        answer = None
    value = answer.get("value") if isinstance(answer, dict) else None
    expires = answer.get("expires_at") if isinstance(answer, dict) else None
    if not isinstance(value, str) or not value or not isinstance(expires, int):
        raise RealtimeError(502, "realtime: the provider's answer has no client secret")
    return ClientSecret(
        value, expires, f"{config.base_url}/realtime/calls", config.model, config.voice
    )
