"""Background processes as tools: exec with background: true, and process_* to act on them.

The ProcessManager (habakkuk.tools.processes) is owned by the runtime, which builds
these tools with it (and with the hook that remembers which turn started a process that
notifies): engine/toolkit/service_tool.py. Processes belong to the agent that started
them. process_write is exec-risk and its input passes the hardline blocklist like a
command; process_kill only ever stops the agent's own processes, so it counts as an own-state
write (workspace mode allows it).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.processes import (
    OutputChunk,
    ProcessError,
    ProcessInfo,
    ProcessManager,
    format_duration,
)
from habakkuk.tools.shell import Exec

DEFAULT_OUTPUT_BYTES = 64_000
MAX_OUTPUT_BYTES = 1_000_000

# Told of every background process a turn starts: (the process, the turn's id).
Started = Callable[[ProcessInfo, str], None]


def _manager(processes: ProcessManager | None) -> ProcessManager:
    if processes is None:
        raise ToolError("background processes are not available in this run")
    return processes


def describe(info: ProcessInfo) -> str:
    """One line about a process: id, state, command."""
    if info.running:
        state = f"running for {format_duration(time.time() - info.started_at)}"
    elif info.killed:
        state = "killed"
    elif info.timed_out:
        state = "killed by its timeout"
    else:
        state = f"exited with code {info.exit_code}"
    command = " ".join(info.command.split())
    if len(command) > 120:
        command = command[:119] + "…"
    return f"{info.id}  {state}  {command}"


def _chunk_text(chunk: OutputChunk) -> str:
    notes = []
    if chunk.discarded:
        notes.append(f"{chunk.discarded:,} bytes before this were discarded by log rotation")
    state = "running" if chunk.running else f"exited with code {chunk.exit_code}"
    notes.append(f"next_offset={chunk.next_offset}; process {state}")
    return (chunk.text + ("\n" if chunk.text and not chunk.text.endswith("\n") else "")) + (
        "[" + "; ".join(notes) + "]"
    )


class BackgroundExec(Exec):
    """exec, plus background: true (returns a process id at once)."""

    description = (
        "Run a bash command; returns exit code and output. cwd defaults to the workspace;"
        " killed after timeout_seconds. background: true returns a process id at once"
        " (process_output reads it, process_kill stops it); notify: true starts a new turn"
        " when it exits."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "cwd": {"type": "string"},
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
            "background": {"type": "boolean"},
            "notify": {"type": "boolean"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(self, processes: ProcessManager | None, started: Started | None) -> None:
        self.processes = processes
        self.started = started
        if processes is not None:  # a foreground command runs where a background one would
            self.sandboxes = processes.sandboxes
            self.groups = processes.groups

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if not args.get("background"):
            if args.get("notify"):
                raise ToolError("notify only applies to background: true")
            timeout = args.get("timeout_seconds")
            if timeout is not None and float(timeout) > 3600:
                raise ToolError("timeout_seconds is at most 3600 for a foreground command")
            plain = {k: v for k, v in args.items() if k not in ("background", "notify")}
            return await super().run(plain, ctx)
        manager = _manager(self.processes)
        cwd = ctx.resolve(args.get("cwd", "."))
        timeout = args.get("timeout_seconds")
        try:
            info = await manager.start(
                agent=ctx.agent,
                session=ctx.session,
                command=args["command"],
                cwd=cwd,
                timeout_seconds=float(timeout) if timeout is not None else None,
                notify=bool(args.get("notify", False)),
            )
        except ProcessError as exc:
            raise ToolError(f"exec: {exc}") from None
        started = self.started
        if started is not None:
            # The runtime remembers the turn, so the exit notice reaches the same chat.
            started(info, ctx.turn)
        notice = " You will get a new turn when it exits." if info.notify else ""
        return ToolOutput(
            f"started background process {info.id} in {info.cwd}.{notice} "
            f"Read its output with process_output(id={info.id!r})."
        )


class ProcessList(Tool):
    name = "process_list"
    description = "List this agent's background processes (running and recently finished)."
    input_schema = {"type": "object", "properties": {}, "additionalProperties": False}
    risk = Risk.READ

    def __init__(self, processes: ProcessManager | None) -> None:
        self.processes = processes

    def title(self, args: dict[str, Any]) -> str:
        return "list background processes"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        infos = _manager(self.processes).list(ctx.agent)
        if not infos:
            return ToolOutput("no background processes")
        return ToolOutput("\n".join(describe(i) for i in infos))


class _ProcessTool(Tool):
    """Shared: the manager, the `id` argument and ProcessError -> ToolError."""

    def __init__(self, processes: ProcessManager | None) -> None:
        self.processes = processes

    def title(self, args: dict[str, Any]) -> str:
        return f"{self.name} {args.get('id', '')}".strip()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            return await self._run(_manager(self.processes), args, ctx)
        except ProcessError as exc:
            raise ToolError(f"{self.name}: {exc}") from None

    @abstractmethod
    async def _run(
        self, manager: ProcessManager, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        """The tool's work, with the manager at hand."""


class ProcessOutput(_ProcessTool):
    name = "process_output"
    description = (
        "Read a background process's output (stdout and stderr together) from byte offset "
        "since (default 0; pass the next_offset it returned last time to continue; a negative "
        "since reads that many bytes from the end)."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "since": {"type": "integer"},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_OUTPUT_BYTES},
        },
        "required": ["id"],
        "additionalProperties": False,
    }
    risk = Risk.READ

    async def _run(
        self, manager: ProcessManager, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        chunk = await manager.output(
            ctx.agent,
            args["id"],
            since=int(args.get("since", 0)),
            max_bytes=int(args.get("max_bytes", DEFAULT_OUTPUT_BYTES)),
        )
        return ToolOutput(_chunk_text(chunk))


class ProcessWait(_ProcessTool):
    name = "process_wait"
    description = (
        "Wait until a background process exits, at most timeout_seconds (default 30); "
        "returns its state."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "timeout_seconds": {"type": "number", "minimum": 0, "maximum": 3600},
        },
        "required": ["id"],
        "additionalProperties": False,
    }
    risk = Risk.READ

    async def _run(
        self, manager: ProcessManager, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        info = await manager.wait(
            ctx.agent, args["id"], timeout_seconds=float(args.get("timeout_seconds", 30))
        )
        suffix = " (still running after the wait)" if info.running else ""
        return ToolOutput(describe(info) + suffix)


class ProcessKill(_ProcessTool):
    name = "process_kill"
    description = "Stop a background process and everything it started."
    input_schema = {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    # It can only stop this agent's own processes: like memory tools, own state.
    risk = Risk.WRITE
    own_state = True

    async def _run(
        self, manager: ProcessManager, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        return ToolOutput(describe(await manager.kill(ctx.agent, args["id"])))


class ProcessWrite(_ProcessTool):
    name = "process_write"
    description = "Write text to a background process's standard input; eof: true closes it."
    input_schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "stdin": {"type": "string"},
            "eof": {"type": "boolean"},
        },
        "required": ["id", "stdin"],
        "additionalProperties": False,
    }
    risk = Risk.EXEC

    def hardline_input(self, args: dict[str, Any]) -> str | None:
        # What is written may be read by a shell: check it like a command.
        return str(args.get("stdin", ""))

    async def _run(
        self, manager: ProcessManager, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        eof = bool(args.get("eof", False))
        await manager.write(ctx.agent, args["id"], args["stdin"], eof=eof)
        closed = " and closed its input" if eof else ""
        return ToolOutput(f"wrote {len(args['stdin'].encode()):,} bytes to {args['id']}{closed}")


def process_tools(processes: ProcessManager | None, started: Started | None) -> list[Tool]:
    """exec (with background: true) and the process_* tools, on `processes`; `started`
    hears of each background process a turn starts."""
    return [
        BackgroundExec(processes, started),
        ProcessList(processes),
        ProcessOutput(processes),
        ProcessWait(processes),
        ProcessKill(processes),
        ProcessWrite(processes),
    ]
