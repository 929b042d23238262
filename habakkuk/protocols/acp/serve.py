"""`habakkuk acp` put together: the editor's connection on stdio, its session agent and
the editor turns' pool, over a runtime whose workers run.

stdout carries the protocol and nothing else: the connection writes to a duplicate of
the original stdout, and file descriptor 1 then points at stderr, so a stray print, a
library's warning or a child process that inherits the descriptor can never corrupt it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import IO, Any, Protocol, cast

from habakkuk.engine.agent.turn import TurnRunner
from habakkuk.engine.errors import HabakkukError

from .editor_tools import EditorRegistry
from .runs import EditorTurns
from .session_agent import AcpHost, SessionAgent


class AcpServeHost(AcpHost, Protocol):
    """The runtime with its workers started (its turn runner exists then)."""

    turn_runner: TurnRunner | None


async def protocol_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, IO[bytes]]:
    """The editor's reader (stdin) and writer (the original stdout), with descriptor 1
    moved to stderr; the third value is the writer's file, to keep open while it runs."""
    from acp import stdio_streams

    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    real = sys.stdout
    # stdio_streams connects to sys.stdout: the duplicate, for the moment it takes.
    sys.stdout = out  # only its descriptor is used: the pipe connects to it
    try:
        reader, writer = await stdio_streams()
    except ValueError:  # asyncio's pipe transports take pipes, sockets and terminals only
        out.close()
        raise HabakkukError.said("acp.not_a_pipe") from None
    finally:
        sys.stdout = real
    os.dup2(2, 1)  # from now on fd 1 is stderr: nothing else can reach the editor's pipe
    sys.stdout = sys.stderr
    return reader, writer, out


def _titles(registry: EditorRegistry) -> Any:
    def title(tool: str, given: dict[str, Any]) -> str:
        found = registry.get(tool)
        if found is None:
            return tool
        try:
            return found.title(given)
        except Exception:  # an input the summary cannot show: the tool's name
            return tool

    return title


async def serve_stdio(host: AcpServeHost, agent: str | None) -> None:
    """Serve one editor on stdin/stdout until it closes the connection."""
    from acp import run_agent
    from acp.interfaces import Agent

    runner = host.turn_runner
    if runner is None:
        raise RuntimeError("start the runtime's workers first")
    editor = SessionAgent(host, agent)
    turns = EditorTurns(
        host.queue,
        host.transcripts,
        runner.deps,
        editor,
        editor.live,
        settled=host.job_settled,
    )
    registry = turns.runner.deps.tools
    if isinstance(registry, EditorRegistry):
        editor.title = _titles(registry)
    editor.turns = turns
    turns.pool.start()
    # Attended: the editor answers this process's approvals of its turns.
    attendance = host.approvals.attach()
    try:
        reader, writer, out = await protocol_streams()
        with contextlib.closing(out):
            # The methods it leaves out (modes, config options, fork, resume, list) answer
            # "method not found", as the package's router does for a missing handler.
            await run_agent(cast("Agent", editor), writer, reader)
    finally:
        await editor.close()
        await turns.pool.stop()
        attendance.release()
