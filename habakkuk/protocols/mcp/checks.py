"""What `habakkuk doctor` can report about MCP servers without starting any of them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from habakkuk.engine.config import Config
from habakkuk.engine.home import Environment, Home

from .transport import missing_variables


@dataclass
class Finding:
    """One line of the report: status is OK, WARN or FAIL."""

    status: str
    server: str
    message: str

    def line(self) -> str:
        return f"{self.status:<4} mcp_servers.{self.server}: {self.message}"


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
        if server.command is not None and shutil.which(server.command) is None:
            problems += 1
            findings.append(Finding("FAIL", name, f"program {server.command!r} is not on PATH"))
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
