"""A reference A2A agent built from the a2a-sdk's own server classes, on 127.0.0.1.

DefaultRequestHandler, its in-memory task store and create_jsonrpc_routes (with the 0.3
compat layer) under uvicorn: the server our client must talk to. The agent echoes; a
message holding "slow" stays working until the test lets it finish, so the client's
polling of tasks/get is exercised. The 0.3 agent serves its card in the 0.3 shape (url,
preferredTransport, protocolVersion 0.3.0) as deployed 0.3 agents do. A bearer token, when
given, is asked of every JSON-RPC call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import uvicorn
from a2a.helpers.proto_helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from tests.helpers import eventually


@dataclass
class Seen:
    """What the reference agent was sent."""

    texts: list[str] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)
    metadata: list[dict[str, object]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)


class EchoExecutor(AgentExecutor):
    """Echo the text back as an artifact; "slow" waits for `seen.release`."""

    def __init__(self, seen: Seen):
        self.seen = seen

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        assert context.task_id is not None and context.context_id is not None
        self.seen.texts.append(text)
        self.seen.contexts.append(context.context_id)
        if context.message is not None:
            from google.protobuf.json_format import MessageToDict

            self.seen.metadata.append(MessageToDict(context.message.metadata))
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message is not None else [],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if "slow" in text:
            await self.seen.release.wait()
        await updater.add_artifact([new_text_part(f"peer says: {text}")], name="reply")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


@dataclass
class Reference:
    """A running reference agent."""

    url: str
    seen: Seen


def _card(url: str, version: str) -> AgentCard:
    return AgentCard(
        name="Reference",
        description="The a2a-sdk's reference agent",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url + "/rpc", protocol_binding="JSONRPC", protocol_version=version)
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Says it back", tags=["echo"])],
    )


def _legacy_card(url: str) -> dict[str, object]:
    return {
        "protocolVersion": "0.3.0",
        "name": "Reference",
        "description": "The a2a-sdk's reference agent",
        "url": url + "/rpc",
        "preferredTransport": "JSONRPC",
        "version": "1.0.0",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Says it back", "tags": []}],
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "security": [{"bearer": []}],
    }


class _Bearer(BaseHTTPMiddleware):
    def __init__(self, app: ASGIApp, token: str | None):
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        wanted = f"Bearer {self.token}"
        if (
            self.token
            and request.url.path == "/rpc"
            and request.headers.get("authorization") != (wanted)
        ):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)


@contextlib.asynccontextmanager
async def reference_agent(version: str, token: str | None = None) -> AsyncIterator[Reference]:
    """The reference agent speaking `version` ("1.0" or "0.3") on a free loopback port."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    seen = Seen()
    card = _card(url, version)
    handler = DefaultRequestHandler(EchoExecutor(seen), InMemoryTaskStore(), card)
    routes = create_jsonrpc_routes(handler, "/rpc", enable_v0_3_compat=version == "0.3")
    if version == "0.3":

        async def legacy(request: Request) -> Response:
            return JSONResponse(_legacy_card(url))

        routes.append(Route("/.well-known/agent-card.json", legacy))
    else:
        routes.extend(create_agent_card_routes(card))
    app = Starlette(routes=routes)
    app.add_middleware(_Bearer, token=token)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually(lambda: server.started, what="the reference agent to listen")
        yield Reference(url, seen)
    finally:
        seen.release.set()
        server.should_exit = True
        await serving
        sock.close()
