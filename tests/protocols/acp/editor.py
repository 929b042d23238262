"""An editor for the ACP tests: the `agent-client-protocol` package's client side, driving
a real `habakkuk acp` process over its stdio pipes as Zed or Toad would.

`EditorClient` is the editor's half (acp.interfaces.Client): it records every session
update, answers permission requests from a list the test gives, and serves
fs/read_text_file and fs/write_text_file from its "unsaved buffers" (a dict), so a test
can tell the file tools went through it (the files on disk differ or do not exist).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp import RequestError, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
    WriteTextFileResponse,
)

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection
    from acp.interfaces import Client

REPO = Path(__file__).resolve().parents[3]
BOUND = 60.0  # seconds: the process is real and cold-started


class EditorClient:
    """The editor side of the connection (see the module docstring)."""

    def __init__(
        self, answers: list[str] | None = None, buffers: dict[str, str] | None = None
    ) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.answers = list(answers or [])  # option ids, in order; "" cancels the request
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.buffers = dict(buffers or {})
        self.written: dict[str, str] = {}
        self.changed = asyncio.Event()

    def kinds(self) -> list[str]:
        """The session_update kinds received, in order."""
        return [str(update.session_update) for _, update in self.updates]

    def runs(self) -> list[str]:
        """The kinds received with each run of one kind counted once (a text streams in
        pieces)."""
        found: list[str] = []
        for kind in self.kinds():
            if not found or found[-1] != kind:
                found.append(kind)
        return found

    def of_kind(self, kind: str) -> list[Any]:
        return [update for _, update in self.updates if update.session_update == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(update.content.text for update in self.of_kind(kind))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        self.changed.set()
        chosen = self.answers.pop(0) if self.answers else ""
        if not chosen:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.buffers[path] = content
        self.written[path] = content
        return WriteTextFileResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


def agent_env(home: Path) -> dict[str, str]:
    """The process's environment: this checkout's code, the test's home."""
    return {
        **os.environ,
        "HABAKKUK_HOME": str(home),
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
    }


@contextlib.asynccontextmanager
async def habakkuk_acp(
    client: EditorClient, home: Path, stderr: Path, *args: str
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    """A real `habakkuk acp` process with `client` connected to it; its stderr goes to the
    file `stderr` (stdout carries only the protocol)."""
    with stderr.open("wb") as errors:
        async with spawn_agent_process(
            cast("Client", client),
            sys.executable,
            "-m",
            "habakkuk.cli",
            "acp",
            *args,
            env=agent_env(home),
            cwd=REPO,
            transport_kwargs={"stderr": errors, "shutdown_timeout": BOUND},
        ) as (conn, process):
            yield conn, process


async def until(client: EditorClient, condition: Any, what: str) -> None:
    """Wait (bounded) until `condition()` holds, woken by each update or request."""

    async def wait() -> None:
        while not condition():
            client.changed.clear()
            await client.changed.wait()

    try:
        await asyncio.wait_for(wait(), BOUND)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}: {client.kinds()}") from None
