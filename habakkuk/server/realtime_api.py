"""Live mode's endpoints (spec 001 "Live mode"): thin handlers over the calls service
(habakkuk.services.live_calls) and the minting client (habakkuk.voice.realtime_secrets).

POST /api/realtime/session mints a client secret (501 without realtime:, 503 without
its key, 502 passing on the provider's refusal); /tool, /transcript and /end bridge the
call into the conversation. /session and /end answer 501 without realtime:; /tool and
/transcript need only the web channel. Bad input is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from habakkuk.channels.web import web_turn_id
from habakkuk.services.live_calls import Line, LineRole, LiveCalls, Posted, WaitingPrompt
from habakkuk.voice.realtime_secrets import TOOL_NAME, RealtimeError, mint

from .chat import WebChannel, check_conversation
from .errors import ApiError
from .inputs import read_json
from .served import Served, field, json_response, only_fields, server_of

REALTIME_OFF = (
    "Live mode is not configured: add a realtime: section (GET /api/app says realtime: false)"
)
MAX_LINES = 50
MAX_LINE_CHARS = 10_000
MAX_REQUEST_CHARS = 20_000
MAX_CALL_ID = 150


class WebLiveChat:
    """The web chat as Live mode's calls use it (services.live_calls.LiveChat)."""

    def __init__(self, channel: WebChannel) -> None:
        self.channel = channel

    async def post(
        self, conversation: str, text: str, *, shown: str, agent: str | None, key: str | None
    ) -> Posted:
        result = await self.channel.handle(
            conversation, text, agent=agent, client_id=key, shown=shown
        )
        turn = result.get("turn")
        return Posted(turn if isinstance(turn, str) and turn else None, str(result["message"]))

    def turn_for(self, conversation: str, key: str) -> str:
        return web_turn_id(conversation, key)

    async def record(self, conversation: str, role: LineRole, text: str) -> None:
        binding = await self.channel.store.conversation(conversation)
        await self.channel.store.append(
            conversation, role, text, session=binding.session if binding else ""
        )

    async def waiting_approval(self, conversation: str) -> WaitingPrompt | None:
        gateway = self.channel.service.gateway
        address = self.channel.address(conversation)
        prompt = await gateway.store.waiting_prompt(address.conversation)
        if prompt is None or prompt.kind != "approval":
            return None
        return WaitingPrompt(prompt.turn, prompt.tool, prompt.summary)

    async def session_for(self, conversation: str, agent: str | None) -> str:
        return await self.channel.ensure_session(conversation, agent)


def live_calls(server: Served) -> LiveCalls:
    """The server's Live mode calls (made once with the server)."""
    return server.live


def _configured(server: Served) -> None:
    if server.runtime.config.realtime is None:
        raise ApiError(501, REALTIME_OFF)


def _agent(body: dict[str, Any]) -> str | None:
    agent = field(body, "agent", str)
    return agent or None


async def session(request: web.Request) -> web.Response:
    """POST /api/realtime/session {conversation, agent?}: a client secret for one call."""
    server = server_of(request)
    _configured(server)
    body = await read_json(request)
    only_fields(body, {"conversation", "agent"})
    check_conversation(body.get("conversation"))
    agent = _agent(body)
    if agent is not None:
        server.runtime.config.agent(agent)  # unknown agent -> 404
    config = server.runtime.config.realtime
    assert config is not None
    try:
        secret = await mint(config, server.runtime.env)
    except RealtimeError as exc:
        raise ApiError(exc.status, str(exc)) from None
    return json_response(
        {
            "client_secret": secret.value,
            "expires_at": secret.expires_at,
            "calls_url": secret.calls_url,
            "model": secret.model,
            "voice": secret.voice,
            "tool": TOOL_NAME,
        }
    )


async def tool(request: web.Request) -> web.Response:
    """POST /api/realtime/tool {conversation, agent?, call_id?, request}: {output}."""
    server = server_of(request)
    body = await read_json(request)
    only_fields(body, {"conversation", "agent", "call_id", "request"})
    conversation = check_conversation(body.get("conversation"))
    text = (field(body, "request", str) or "").strip()
    if not text:
        raise ApiError(400, "request is required (what the user asked, a string)")
    if len(text) > MAX_REQUEST_CHARS:
        raise ApiError(413, f"request is over {MAX_REQUEST_CHARS:,} characters")
    call_id = field(body, "call_id", str) or None
    if call_id is not None and len(call_id) > MAX_CALL_ID:
        raise ApiError(400, f"call_id must be at most {MAX_CALL_ID} characters")
    output = await live_calls(server).ask(conversation, text, agent=_agent(body), call_id=call_id)
    return json_response({"output": output})


def _lines(value: Any) -> list[Line]:
    if not isinstance(value, list) or not value:
        raise ApiError(400, "lines is required (a list of {role, text})")
    if len(value) > MAX_LINES:
        raise ApiError(400, f"at most {MAX_LINES} lines per request")
    lines: list[Line] = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) - {"role", "text"}:
            raise ApiError(400, f"lines[{i}] must be an object with role and text")
        role, text = item.get("role"), item.get("text")
        if role not in ("user", "assistant"):
            raise ApiError(400, f"lines[{i}].role must be user or assistant")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, f"lines[{i}].text is required (a string)")
        if len(text) > MAX_LINE_CHARS:
            raise ApiError(413, f"lines[{i}].text is over {MAX_LINE_CHARS:,} characters")
        lines.append(Line("user" if role == "user" else "assistant", text.strip()))
    return lines


async def transcript(request: web.Request) -> web.Response:
    """POST /api/realtime/transcript {conversation, lines}: {recorded}."""
    server = server_of(request)
    body = await read_json(request)
    only_fields(body, {"conversation", "lines"})
    conversation = check_conversation(body.get("conversation"))
    recorded = await live_calls(server).transcript(conversation, _lines(body.get("lines")))
    return json_response({"recorded": recorded})


async def end(request: web.Request) -> web.Response:
    """POST /api/realtime/end {conversation, agent?}: {noted, session}; 202 when the
    note waits for a running turn."""
    server = server_of(request)
    _configured(server)
    body = await read_json(request)
    only_fields(body, {"conversation", "agent"})
    conversation = check_conversation(body.get("conversation"))
    ended = await live_calls(server).end(conversation, _agent(body))
    return json_response(
        {"noted": ended.noted, "session": ended.session}, 202 if ended.later else 200
    )


def setup(app: web.Application) -> None:
    """Register the Live mode routes."""
    app.router.add_post("/api/realtime/session", session)
    app.router.add_post("/api/realtime/tool", tool)
    app.router.add_post("/api/realtime/transcript", transcript)
    app.router.add_post("/api/realtime/end", end)
