"""The A2A server: Agent Cards and JSON-RPC at /a2a (spec 000 "Agent2Agent").

- GET /.well-known/agent-card.json: the home's card, a skill per served agent; GET
  /a2a/<agent> (and /a2a/<agent>/.well-known/agent-card.json): that agent's own card.
  0.3 shape unless the request asks for 1.0 (A2A-Version: 1.0, or ?version=1.0). Public.
- POST /a2a and /a2a/<agent>: JSON-RPC, each call answered in its method's version. A
  message goes to the endpoint's agent, else its metadata.agent, else `habakkuk`, else the
  first served agent by name. Every call needs the bearer token of `a2a.token_env`, else
  the HTTP token (none on a loopback-only server without one): 401 otherwise.
- Client mistakes are JSON-RPC errors with the spec's codes (HTTP 200), never a 500.
"""

from __future__ import annotations

import hmac
import json
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from habakkuk.engine.a2a_config import served_agents
from habakkuk.engine.errors import ConfigError
from habakkuk.protocols.a2a import wire
from habakkuk.protocols.a2a.cards import CardSpec, card, wants_v1
from habakkuk.protocols.a2a.wire import RpcError, Version

from . import a2a_stream
from .a2a_tasks import A2ATasks
from .errors import ApiError
from .inputs import JSON_LIMIT, header, read_body
from .served import Served, json_response

log = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
PREFIX = "/a2a"
DEFAULT_AGENT = "habakkuk"


@dataclass(frozen=True)
class A2AServing:
    """What the A2A routes of one server know: the agents, the token, the tasks."""

    agents: dict[str, str]  # agent -> skill description
    token: str | None
    tasks: A2ATasks
    version: str
    send_wait: float  # a2a.send_wait: how long a blocking send holds its request

    def token_matches(self, given: str) -> bool:
        """True when `Authorization` carries the A2A token (constant time)."""
        if self.token is None:
            return True
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(
            value.strip().encode("utf-8", "surrogateescape"), self.token.encode()
        )

    def default_agent(self) -> str:
        """habakkuk when served, else the first served agent by name."""
        if DEFAULT_AGENT in self.agents:
            return DEFAULT_AGENT
        return sorted(self.agents)[0]


SERVING_KEY: web.AppKey[A2AServing] = web.AppKey("a2a", A2AServing)


def is_a2a_path(path: str) -> bool:
    """Paths whose callers the A2A routes check themselves (cards are public)."""
    return path in (CARD_PATH, PREFIX) or path.startswith(PREFIX + "/")


def _serving(request: web.Request) -> A2AServing:
    return request.app[SERVING_KEY]


def _base_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _spec(request: web.Request, agent: str | None) -> CardSpec:
    serving = _serving(request)
    base = _base_url(request)
    if agent is None:
        return CardSpec(
            name="Habakkuk",
            description="Habakkuk's agents: " + ", ".join(serving.agents),
            url=base + PREFIX,
            skills=serving.agents,
            version=serving.version,
            token=serving.token is not None,
        )
    return CardSpec(
        name=agent,
        description=serving.agents[agent],
        url=f"{base}{PREFIX}/{agent}",
        skills={agent: serving.agents[agent]},
        version=serving.version,
        token=serving.token is not None,
    )


def _card_version(request: web.Request) -> Version:
    asked = wants_v1(request.headers.get(wire.VERSION_HEADER), request.query.get("version"))
    return "1.0" if asked else "0.3"


async def home_card(request: web.Request) -> web.Response:
    """GET /.well-known/agent-card.json."""
    return json_response(card(_spec(request, None), _card_version(request)))


def _agent_of_path(request: web.Request) -> str:
    agent = request.match_info["agent"]
    if agent not in _serving(request).agents:
        raise ApiError(404, f"no agent {agent!r} is served over A2A")
    return agent


async def agent_card(request: web.Request) -> web.Response:
    """GET /a2a/<agent>: the agent's own card."""
    return json_response(card(_spec(request, _agent_of_path(request)), _card_version(request)))


async def rpc_home(request: web.Request) -> web.StreamResponse:
    """POST /a2a."""
    return await _rpc(request, None)


async def rpc_agent(request: web.Request) -> web.StreamResponse:
    """POST /a2a/<agent>."""
    return await _rpc(request, _agent_of_path(request))


def http_error_body(request: web.Request, status: int, message: str) -> dict[str, Any]:
    """The JSON-RPC error answering a POST to /a2a that failed before its call was read
    (the server's checks: content type, body size and deadline, ...): a client of a
    JSON-RPC endpoint reads `error` as an object. A wrong Content-Type is -32005."""
    if status == 415:
        code = wire.CONTENT_TYPE_NOT_SUPPORTED
    else:
        code = wire.INVALID_REQUEST if status < 500 else wire.INTERNAL_ERROR
    version = _card_version(request)
    return wire.failure(None, RpcError(code, message), version)


def _unauthorized() -> web.Response:
    error = RpcError(wire.INVALID_REQUEST, "missing or wrong bearer token")
    return json_response(wire.failure(None, error), 401, {"WWW-Authenticate": "Bearer"})


async def _rpc(request: web.Request, agent: str | None) -> web.StreamResponse:
    serving = _serving(request)
    if not serving.token_matches(header(request, "Authorization")):
        return _unauthorized()
    raw = await read_body(request, JSON_LIMIT)
    request_id: Any = None
    version: Version | None = None  # the method's, once known (it shapes the errors)
    try:
        body = _parse(raw)
        request_id = _id_of(body)
        version, op = wire.METHODS[_method_of(body)]
        wire.check_version_header(request.headers.get(wire.VERSION_HEADER))
        params = body.get("params", {})
        if op in ("stream", "subscribe"):
            return await _streaming(request, serving, agent, version, op, request_id, params)
        result = await _call(serving, agent, version, op, params)
        return json_response(wire.answer(request_id, result))
    except RpcError as exc:
        return json_response(wire.failure(request_id, exc, version))


def _parse(raw: bytes) -> dict[str, Any]:
    """The request object; RpcError -32700 (not JSON) or -32600 (not one object)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise RpcError(wire.PARSE_ERROR, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise RpcError(wire.INVALID_REQUEST, "the request must be one JSON-RPC object")
    return body


def _id_of(body: dict[str, Any]) -> Any:
    """The request's id (answered back, also with an error); -32600 when malformed."""
    request_id = body.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, (str, int))
    ):
        raise RpcError(wire.INVALID_REQUEST, "id must be a string, a number or null")
    return request_id


def _method_of(body: dict[str, Any]) -> str:
    """The method, known; -32600 for a request that is not JSON-RPC 2.0, -32601 else."""
    if body.get("jsonrpc") != "2.0":
        raise RpcError(wire.INVALID_REQUEST, 'jsonrpc must be "2.0"')
    method = body.get("method")
    if not isinstance(method, str):
        raise RpcError(wire.INVALID_REQUEST, "method must be a string")
    if method not in wire.METHODS:
        raise RpcError(wire.METHOD_NOT_FOUND, f"method {method!r} not found")
    return method


def _agent_for(serving: A2AServing, endpoint: str | None, named: str | None) -> str:
    if endpoint is not None:
        return endpoint
    if named is not None:
        if named not in serving.agents:
            known = ", ".join(sorted(serving.agents))
            raise RpcError(wire.INVALID_PARAMS, f"agent {named!r} is not served over A2A ({known})")
        return named
    return serving.default_agent()


async def _call(
    serving: A2AServing, endpoint: str | None, version: Version, op: str, params: Any
) -> Any:
    tasks = serving.tasks
    if op == "send":
        incoming = wire.read_send(params, version)
        agent = _agent_for(serving, endpoint, incoming.agent)
        record = await tasks.start(incoming, agent)
        if incoming.wait:
            view = await tasks.wait(record, serving.send_wait)
        else:
            view = await tasks.view(record)
        return wire.send_result(version, view, incoming.history_length)
    if op == "get":
        record = await tasks.record(wire.read_task_id(params))
        view = await tasks.view(record)
        return wire.get_result(version, view, wire.read_history_length(params))
    if op == "cancel":
        record = await tasks.record(wire.read_task_id(params))
        return wire.get_result(version, await tasks.cancel(record), None)
    if op == "list":
        query = wire.read_list(params)
        tasks_page, total, following = await tasks.page(query)
        return wire.list_result(version, tasks_page, query, total, following)
    if op == "push":
        raise RpcError(wire.PUSH_NOT_SUPPORTED, "push notifications are not supported")
    if op == "card":
        if version == "1.0":  # the card declares no capabilities.extendedAgentCard
            raise RpcError(
                wire.UNSUPPORTED_OPERATION, "this agent does not support an extended agent card"
            )
        raise RpcError(
            wire.EXTENDED_CARD_NOT_CONFIGURED, "this agent has no authenticated extended card"
        )
    raise RpcError(wire.UNSUPPORTED_OPERATION, f"{op} is not supported")


async def _streaming(
    request: web.Request,
    serving: A2AServing,
    endpoint: str | None,
    version: Version,
    op: str,
    request_id: Any,
    params: Any,
) -> web.StreamResponse:
    tasks = serving.tasks
    if op == "stream":
        incoming = wire.read_send(params, version)
        agent = _agent_for(serving, endpoint, incoming.agent)
        # The stream follows the turn through this process's events: it runs here.
        record = await tasks.start(incoming, agent, here=True)
    else:
        record = await tasks.record(wire.read_task_id(params))
        state = (await tasks.view(record)).state
        if state in wire.FINAL_STATES:  # the spec: nothing to follow in a terminal task
            raise RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {record.task!r} is {state}; tasks/get reads it",
            )
    return await a2a_stream.follow(request, tasks, record, version, request_id)


def setup(app: web.Application, server: Served) -> None:
    """Register the cards and /a2a (a2a.serve); ConfigError when a2a.token_env is unset."""
    from habakkuk import __version__

    config = server.runtime.config
    assert config.a2a is not None
    token = server.token
    if config.a2a.token_env:
        token = server.runtime.env.get(config.a2a.token_env)
        if not token:
            raise ConfigError(
                f"a2a.token_env: the variable {config.a2a.token_env} is not set "
                "(in the environment or the home's .env)"
            )
    app[SERVING_KEY] = A2AServing(
        agents=served_agents(config.a2a, config.agents),
        token=token,
        tasks=A2ATasks(server),
        version=str(__version__),
        send_wait=config.a2a.send_wait_seconds,
    )
    app.router.add_get(CARD_PATH, home_card)
    app.router.add_get(PREFIX + CARD_PATH, home_card)  # beside its endpoint, as clients look
    app.router.add_post(PREFIX, rpc_home)
    # A client whose HTTP library joins "/" to the endpoint's URL (httpx's base_url does)
    # posts to /a2a/: the same endpoint.
    app.router.add_post(PREFIX + "/", rpc_home)
    app.router.add_get(PREFIX + "/{agent}", agent_card)
    app.router.add_get(PREFIX + "/{agent}" + CARD_PATH, agent_card)
    app.router.add_post(PREFIX + "/{agent}", rpc_agent)
