"""`habakkuk status`: is the home ready? The parts of /readyz in the terminal, one a line.

When a process of the home serves HTTP, its GET /readyz is read over loopback (what a
load balancer sees: the stores, the listener, every channel, MCP server and worker
pool). Otherwise what the home's databases say is shown (the stores answer, the
channels' recorded states, which processes serve the home); MCP links and worker pools
live in a process's memory, so they are only known through a server. The first line
says which source was read.

Exit code: 0 ready, 1 not ready, 2 nothing serves the home.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from habakkuk.runtime import Runtime
    from habakkuk.server.health_types import Part, Readiness
    from habakkuk.services.status_summary import StatusSummary

# Nothing serves the home: no live process, no server to ask.
EXIT_NOTHING = EXIT_USAGE
# /readyz answers within this (it bounds its own store queries at 2 s).
ASK_SECONDS = 5.0


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """`habakkuk status [--json]`."""
    parser.add_argument("--json", action="store_true", help="print the readiness as JSON")


def main(args: argparse.Namespace) -> int:
    """Print each part's readiness; 0 ready, 1 not ready, 2 nothing running."""
    return run_async(_status(as_json=args.json))


async def _status(*, as_json: bool) -> int:
    from habakkuk.cli.common import open_runtime
    from habakkuk.engine.i18n import t
    from habakkuk.services.status_summary import status_summary

    runtime = await open_runtime(current_home())
    try:
        summary = await status_summary(
            timezone=runtime.config.timezone,
            nodes=runtime.nodes,
            ledger=runtime.ledger,
            queue=runtime.queue,
            logs=runtime.logs,
        )
        url = await _served_url(runtime)
        readiness = await _ask(url) if url else None
        if readiness is not None:
            source = t("status.from_server", url=url)
        else:
            if not await _live_nodes(runtime):
                print(t("status.nothing_running", home=runtime.home.root), file=sys.stderr)
                return EXIT_NOTHING
            readiness = await _from_databases(runtime)
            source = t("status.server_silent", url=url) if url else t("status.from_databases")
    finally:
        await runtime.close()
    if as_json:
        import json
        from dataclasses import asdict

        record = {"ready": readiness.ready, **asdict(readiness), "summary": asdict(summary)}
        print(json.dumps(record, indent=2))
    else:
        for line in summary_lines(summary, time.time()):
            print(line)
        said = t("status.ready") if readiness.ready else t("status.not_ready")
        print(f"{said} ({source})")
        for part in readiness.parts:
            print(part_line(part, time.time()))
        if readiness.queue is not None:
            queue = readiness.queue
            print(t("status.queue", pending=queue.pending, running=queue.running))
    return EXIT_OK if readiness.ready else EXIT_FAILED


def summary_lines(summary: StatusSummary, now: float) -> list[str]:
    """The version, who serves the home and for how long, today's spend, recent errors."""
    from datetime import datetime

    from habakkuk.engine.i18n import t

    lines = [t("status.summary.version", version=summary.version)]
    for node in summary.serving:
        uptime = duration(node.uptime)
        lines.append(
            t(
                "status.summary.serving",
                pid=node.pid,
                host=node.host,
                version=node.version,
                uptime=uptime,
            )
        )
    cost, tokens = f"{summary.cost_today:.2f}", f"{summary.tokens_today:,}"
    if summary.unpriced_today:
        lines.append(
            t(
                "status.summary.today_unpriced",
                tokens=tokens,
                cost=cost,
                unpriced=summary.unpriced_today,
            )
        )
    else:
        lines.append(t("status.summary.today", tokens=tokens, cost=cost))
    if not summary.errors:
        lines.append(t("status.summary.no_errors"))
    else:
        lines.append(t("status.summary.errors"))
        for error in summary.errors:
            at = datetime.fromtimestamp(error.at).strftime("%H:%M")
            lines.append(
                t("status.summary.error_line", at=at, source=error.source, text=error.text)
            )
    return lines


def part_line(part: Part, now: float) -> str:
    """One part as a line: kind, name, ok or not, state, since when, by whom, why not."""
    from habakkuk.engine.i18n import t

    mark = t("status.ok") if part.ok else t("status.failing")
    line = f"{part.kind:<9} {part.name:<20} {mark:<6} {part.state}"
    if part.since:
        from datetime import datetime

        at = datetime.fromisoformat(part.since.replace("Z", "+00:00")).timestamp()
        line += " " + t("status.since", duration=duration(now - at))
    if part.served_by and part.served_by != "here":
        line += " " + t("status.served_by", holder=part.served_by)
    if part.reason:
        line += f": {part.reason}"
    return line


def duration(seconds: float) -> str:
    """A duration in s, m, h or d units, as every language shows them ("12s", "5m")."""
    seconds = max(0.0, seconds)
    for unit, size, below in (("s", 1, 120), ("m", 60, 7200), ("h", 3600, 172800)):
        if seconds < below:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds / 86400:.0f}d"


async def _served_url(runtime: Runtime) -> str:
    """The loopback URL of the home's HTTP listener while a process holds it, else ""."""
    from habakkuk.engine.config import parse_listen

    if runtime.config.http is None:
        return ""
    listener = await runtime.http.describe()
    if not listener.holder:
        return ""
    host, port = parse_listen(runtime.config.http.listen)
    if host in ("", "0.0.0.0", "localhost"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def _ask(url: str) -> Readiness | None:
    """The server's /readyz (200 or 503 both carry the parts); None when it does not
    answer as /readyz does."""
    import aiohttp

    try:
        timeout = aiohttp.ClientTimeout(total=ASK_SECONDS)
        async with (
            aiohttp.ClientSession(timeout=timeout) as client,
            client.get(url + "/readyz") as response,
        ):
            if response.status not in (200, 503):
                return None
            return readiness_of(await response.json())
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError):
        return None


def readiness_of(body: dict[str, Any]) -> Readiness:
    """/readyz's JSON as its typed value (KeyError, TypeError when it is not one)."""
    from habakkuk.server.health_types import Part, QueueCounts, Readiness

    parts = tuple(
        Part(
            kind=str(part["kind"]),
            name=str(part["name"]),
            ok=bool(part["ok"]),
            state=str(part["state"]),
            since=str(part["since"]) if part.get("since") else None,
            reason=str(part.get("reason", "")),
            served_by=str(part.get("served_by", "")),
        )
        for part in body["parts"]
    )
    queue = body.get("queue")
    counts = QueueCounts(int(queue["pending"]), int(queue["running"])) if queue else None
    return Readiness(parts, counts)


async def _live_nodes(runtime: Runtime) -> list[Any]:
    """The processes serving the home now (a heartbeat within the stale limit)."""
    try:
        return [node for node in await runtime.nodes.nodes() if not node.stale and not node.here]
    except Exception:  # no nodes table yet: nothing ever served the home
        return []


async def _from_databases(runtime: Runtime) -> Readiness:
    """What the databases say: the stores answer, the listener, the channels' recorded
    states (MCP servers and worker pools are known only to the process running them)."""
    from habakkuk.server.health_types import QueueCounts, Readiness
    from habakkuk.server.readiness_parts import Since, channel_part, listener_part, store_part

    since = Since()
    parts = []
    queue = None
    try:
        queue = QueueCounts.of(await runtime.turns.queue_depth())
        parts.append(store_part("control.db", True, "", since))
    except Exception as exc:
        parts.append(store_part("control.db", False, f"failed ({type(exc).__name__})", since))
    try:
        await runtime.sessions.list_sessions(limit=1)
        parts.append(store_part("transcripts.db", True, "", since))
    except Exception as exc:
        parts.append(store_part("transcripts.db", False, f"failed ({type(exc).__name__})", since))
    if runtime.config.http is not None:
        parts.append(listener_part(await runtime.http.describe(), since))
    here = str(runtime.queue.owner)
    parts.extend(channel_part(health, here) for health in await runtime.control.channel_states())
    return Readiness(tuple(parts), queue)
