"""From a `mcp_servers` entry to a connection: the child's environment, stdio, HTTP.

The SDK's own stdio client passes LOGNAME, SHELL, TERM and USER through as
well; a server must get PATH, HOME and the variables its entry names and
nothing else, so stdio is done here. The child runs in its own process group
(session), and shutdown closes its stdin, waits, signals the group, and finally
kills the group so helpers it started do not linger.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from habakkuk.engine.config import McpServerConfig
from habakkuk.engine.home import Environment, Home

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

EXIT_GRACE = 2.0  # after stdin closes, before SIGTERM
TERM_GRACE = 2.0  # after SIGTERM, before SIGKILL
STDERR_LINES = 20


class TransportError(Exception):
    """A server cannot be reached or started; the message says why."""


def missing_variables(server: McpServerConfig, env: Environment) -> list[str]:
    """The variables named in env/headers (and client_secret_env) that have no value."""
    names = list(server.env.values()) + list(server.headers.values())
    if server.client_secret_env:
        names.append(server.client_secret_env)
    return [name for name in dict.fromkeys(names) if env.get(name) is None]


def child_environment(server: McpServerConfig, env: Environment) -> dict[str, str]:
    """PATH, HOME and the entry's env map, nothing else; TransportError when one is unset."""
    result = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    for child, variable in server.env.items():
        value = env.get(variable)
        if value is None:
            raise TransportError(
                f"variable {variable} (for {child}) is not set; put it in the environment or .env"
            )
        result[child] = value
    return result


def http_headers(server: McpServerConfig, env: Environment) -> dict[str, str]:
    """The entry's headers with values from their variables; TransportError when one is unset."""
    headers: dict[str, str] = {}
    for header, variable in server.headers.items():
        value = env.get(variable)
        if value is None:
            raise TransportError(
                f"variable {variable} (for header {header}) is not set;"
                " put it in the environment or .env"
            )
        headers[header] = value
    return headers


class StdioProcess:
    """What the stdio transport knows about its child, for status and error messages."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.returncode: int | None = None

    def last_error_line(self) -> str:
        """The child's last non-empty stderr line (often why it died)."""
        for line in reversed(self.stderr):
            if line.strip():
                return line.strip()[:300]
        return ""


def _kill_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    env: dict[str, str],
    *,
    cwd: Path | None = None,
    info: StdioProcess | None = None,
    on_exit: Callable[[], None] | None = None,
) -> AsyncIterator[TransportStreams]:
    """Spawn `command` in its own process group and speak newline-delimited JSON-RPC."""
    import anyio
    import mcp_types
    from anyio.streams.text import TextReceiveStream
    from mcp.shared.message import SessionMessage

    info = info or StdioProcess()
    try:
        process = await anyio.open_process(
            [command, *args], env=env, cwd=cwd, start_new_session=True
        )
    except FileNotFoundError:
        where = "no such file" if os.sep in command else "no such program on PATH"
        raise TransportError(f"cannot start {command!r}: {where}") from None
    except PermissionError:
        raise TransportError(f"cannot start {command!r}: permission denied") from None
    except OSError as exc:
        raise TransportError(f"cannot start {command!r}: {exc.strerror or exc}") from None
    info.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buffer = ""
        try:
            async with read_writer:
                async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not line.strip():
                            continue
                        item: SessionMessage | Exception
                        try:
                            message = mcp_types.jsonrpc_message_adapter.validate_json(
                                line, by_name=False
                            )
                            item = SessionMessage(message)
                        except ValueError as exc:
                            item = exc
                        await read_writer.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            if on_exit is not None:
                on_exit()

    async def stderr_reader() -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in TextReceiveStream(process.stderr, errors="replace"):
                info.stderr.extend(chunk.splitlines())

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async def wait_exit(seconds: float) -> bool:
        # wait() also waits for the pipes to close, which helpers may hold open:
        # bounded, and the group is killed afterwards anyway.
        with anyio.move_on_after(seconds):
            await process.wait()
        return process.returncode is not None

    async def stop() -> None:
        write_stream.close()
        assert process.stdin is not None
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
        if not await wait_exit(EXIT_GRACE):
            _kill_group(process.pid, signal.SIGTERM)
            await wait_exit(TERM_GRACE)
        # Always: helpers the server started may outlive it in the group.
        _kill_group(process.pid, signal.SIGKILL)
        await wait_exit(TERM_GRACE)
        info.returncode = process.returncode
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, anyio.BrokenResourceError):
                    await stream.aclose()
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        close = getattr(transport, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stderr_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await stop()
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


def open_transport(
    server: McpServerConfig,
    env: Environment,
    home: Home,
    *,
    info: StdioProcess | None = None,
    on_exit: Callable[[], None] | None = None,
    auth: Any = None,
) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
    """The transport for one entry (not yet entered); TransportError for config problems."""
    if server.command is not None:
        return stdio_transport(
            server.command,
            list(server.args),
            child_environment(server, env),
            cwd=server.cwd,
            info=info,
            on_exit=on_exit,
        )
    import httpx2

    assert server.url is not None
    client = httpx2.AsyncClient(
        headers=http_headers(server, env),
        auth=auth,
        timeout=httpx2.Timeout(30.0, read=max(300.0, server.timeout_seconds + 30)),
        follow_redirects=False,
    )
    return _http(server.url, client)


@asynccontextmanager
async def _http(url: str, client: Any) -> AsyncIterator[TransportStreams]:
    from mcp.client.streamable_http import streamable_http_client

    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams
