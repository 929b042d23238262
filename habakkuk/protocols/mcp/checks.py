"""What `habakkuk doctor` reports about MCP servers: static findings, then a start-up probe."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from habakkuk.engine.config import Config, McpServerConfig
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.toolsets import agents_offered, mcp_toolset

from .transport import missing_variables


@dataclass
class Finding:
    """One line of the report: status is OK, WARN or FAIL."""

    status: str
    server: str
    message: str

    def line(self) -> str:
        return f"{self.status:<4} mcp_servers.{self.server}: {self.message}"


def reaches(config: Config, server: str) -> list[str]:
    """The agents offered server `server`'s tools (engine/toolsets.py decides), sorted."""
    return agents_offered(config.agents, server)


def reach_line(config: Config, server: str) -> str:
    """How the server's tools reach agents, in words: which agents, or what to add."""
    agents = reaches(config, server)
    toolset = mcp_toolset(server)
    if not agents:
        return (
            f'no agent gets its tools: add "{toolset}" to an agent\'s toolsets '
            "(an agent with no toolsets: gets every MCP server)"
        )
    noun = "agent" if len(agents) == 1 else "agents"
    return f"its tools reach {noun} {', '.join(agents)} (toolset {toolset})"


def mcp_findings(config: Config, env: Environment, home: Home) -> list[Finding]:
    """Missing secrets, programs not on PATH and missing or expired OAuth logins."""
    from .oauth import login_state

    findings: list[Finding] = []
    for name, server in config.mcp_servers.items():
        problems = 0
        missing = missing_variables(server, env)
        if missing:
            problems += 1
            findings.append(
                Finding("FAIL", name, f"variables not set: {', '.join(missing)} (env or .env)")
            )
        unusable = program_problem(server.command) if server.command is not None else None
        if unusable:
            problems += 1
            findings.append(Finding("FAIL", name, unusable))
        if server.auth == "oauth":
            state = login_state(home, name)
            if state is not None:
                problems += 1
                findings.append(Finding("WARN", name, state))
        if server.url is not None and server.url.startswith("http://"):
            host = server.url.split("//", 1)[1].split("/", 1)[0].split(":", 1)[0]
            if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
                findings.append(Finding("WARN", name, "plain http to a remote host"))
        if not problems:
            findings.append(Finding("OK", name, "configured"))
    return findings


def ok_detail(state: str, config: Config, server: str) -> str:
    """A sound server's line: its state, then which agents its tools reach (when any)."""
    if not reaches(config, server):
        return state  # the WARN line beside it says what to add
    return f"{state}; {reach_line(config, server)}"


def program_problem(command: str) -> str | None:
    """Why `command` cannot be started, or None: a path is checked as a file, a name on PATH."""
    if os.sep not in command:
        return None if shutil.which(command) else f"program {command!r} is not on PATH"
    if not os.path.exists(command):
        return f"program {command!r} does not exist"
    if os.path.isdir(command) or not os.access(command, os.X_OK):
        return f"program {command!r} is not an executable file"
    return None


async def probe_server(
    server: McpServerConfig, env: Environment, home: Home, timeout: float
) -> str | None:
    """Start the server and ask it to initialize and list its tools; None when it did.

    Otherwise the one-line reason, with the server's last stderr line when it has one.
    """
    import anyio
    from mcp import Client
    from mcp_types import Implementation

    from habakkuk import __version__

    from .manager import describe_failure
    from .transport import StdioProcess, open_transport

    info = StdioProcess()
    try:
        with anyio.fail_after(timeout):
            transport = open_transport(server, env, home, info=info)
            client_info = Implementation(name="habakkuk-doctor", version=__version__)
            async with Client(transport, client_info=client_info, cache=None) as client:
                await client.list_tools()
    except TimeoutError:
        reason = f"no answer to initialize within {timeout:g}s"
    except Exception as exc:
        reason = describe_failure(exc)
    else:
        return None
    tail = info.last_error_line()
    return f"{reason} (stderr: {tail})" if tail and tail not in reason else reason
