"""The tool registry: what a tool is, and the decision and run path of every call.

The decision runs in this order: the hardline blocklist (no mode, reviewer or
human can allow it), the tool's own refusal, permission mode x risk, then the
approver; a write to memory or skills in a run that read outside content (taint.py)
goes to the approver whatever the mode allows. Unattended runs (no approver) deny what
needs approval. Whatever
happens, the call ends with a ToolResultBlock; output over the inline budget is
saved as a blob and the model gets a preview and the path. Images a tool attaches
(ToolOutput.media) travel beside the result (`call_with_media`) for the turn to
place; a call that failed or was denied shows none.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..events import EventBus, ToolEnded, ToolStarted
from ..llm.types import ImageBlock, NativeComputer, ToolResultBlock, ToolSpec, ToolUseBlock
from ..store import BlobStore
from .approvals import ApprovalDecision, ApprovalRequest, Approver, SessionGrants, human_of
from .home_files import HomeFile, home_file, knowledge_file
from .outcome import Outcome
from .permissions import Risk, check_path, decide, inside
from .taint import Taint

if TYPE_CHECKING:
    from ..sessions import TranscriptStore
    from ..state import StateStore

log = logging.getLogger(__name__)

Hardline = Callable[[str], str | None]
# Tools that may change the workspace: the first such call of a turn on a path inside the
# workspace (for exec: with a cwd inside it) takes a checkpoint first.
MUTATORS = frozenset({"write_file", "edit_file", "apply_patch", "exec"})


class ToolError(Exception):
    """A tool failed in a way the model should read (one line, no traceback)."""


# An agent with an ssh sandbox: its commands would never see a file written here.
_REMOTE_WRITE = (
    "refused: {tool} writes files on this machine, but this agent's commands run on a "
    "remote host (sandbox: ssh) that would never see them; change files there with exec"
)


@dataclass
class ToolOutput:
    text: str
    is_error: bool = False
    # Set by the registry when the call was denied or refused before it ran.
    denied: bool = False
    # Images the tool shows the model (blob references, stored with ctx.blobs.put): the turn
    # puts them after all the tool results of the message, as providers require.
    media: list[ImageBlock] = field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        """ok, error or denied (the registry publishes it as tool.end's status)."""
        if self.denied:
            return "denied"
        return "error" if self.is_error else "ok"


@dataclass
class CallResult:
    """One call's result block and the images it shows the model (none unless it
    succeeded)."""

    result: ToolResultBlock
    media: list[ImageBlock] = field(default_factory=list)


@dataclass
class ToolContext:
    """Everything a call may need, passed explicitly (no module-level state): the call
    itself and the engine's services. The services of the layers above the engine (the
    board, the memory, the outbox...) are bound to the tools that use them when their
    toolset is built (service_tool.py), never carried here."""

    agent: str
    session: str
    turn: str
    workspace: Path
    mode: str
    home: Path
    blobs: BlobStore
    bus: EventBus
    approver: Approver | None = None
    task: str = ""  # the user message that started the turn (for reviewers)
    exec_timeout: float = 120.0
    timezone: str = "UTC"  # the config timezone, for times a tool shows
    transcripts: TranscriptStore | None = None  # for session_search
    state: StateStore | None = None
    tool_catalog: list[Tool] | None = None  # what tool_search searches
    # Snapshot the workspace; the turn makes it run once per turn (None: no checkpoints).
    checkpoint: Callable[[], Awaitable[None]] | None = None
    # Set by the registry for one call whose paths were all inside the workspace (and
    # none the home's own file): its writes must land there, so a write tool opens its
    # target beneath the workspace and refuses one that now resolves elsewhere.
    confined: bool = False
    # The tool_use_id of the one call a tool runs for (set by the registry on its per-call
    # copy; delegate names its child's card with it).
    call_id: str = ""
    # Calls of this turn whose tool began to run, so a stop can tell "interrupted" from
    # "not run" (stopped while deciding or waiting for approval).
    ran: set[str] = field(default_factory=set)
    # Whether the user is stopping this turn (not a shutdown, after which the turn resumes):
    # a tool that started work elsewhere (a delegated child) stops it too.
    stopped_by_user: Callable[[], bool] | None = None
    # False when the agent's commands run on another host (sandbox: ssh): the workspace
    # here is not the one they see, so the file-writing tools are refused.
    files_here: bool = True
    # Whether outside content has entered this run of the turn (see taint.py); shared by
    # every call of the run, including the per-call copies the registry makes.
    taint: Taint = field(default_factory=Taint)
    # Counters a toolset keeps for one run of the turn (the computer's actions against
    # max_actions); shared by the per-call copies like `taint`.
    counters: dict[str, int] = field(default_factory=dict)

    def resolve(self, path: str) -> Path:
        """A tool path: relative paths are inside the workspace; `~` expands."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.workspace / candidate
        return candidate


class Tool(ABC):
    """A built-in or plugged-in tool. Subclasses set the class attributes and `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]]
    risk: ClassVar[Risk]
    own_state: ClassVar[bool] = False
    # Network-risk tools that workspace mode runs without asking (MCP servers).
    network_in_workspace: ClassVar[bool] = False
    # Tools that read the contents of their paths: the home's credential files are
    # refused to them below full mode.
    reads_files: ClassVar[bool] = False
    # Tools that write the files their paths name (write_file, edit_file, apply_patch):
    # the agents' memory and skills are refused to them in every mode (home_files).
    writes_files: ClassVar[bool] = False
    # Whether running this tool brings outside content into the turn (taints it). None:
    # every call of network risk does; a tool sets True or False to say otherwise.
    taints: ClassVar[bool | None] = None
    # Writes to the agent's memory or skills: in a tainted run (outside content has come
    # in) they go to the approver in every mode that would otherwise run them unasked, and
    # a grant "for the session" does not skip that; read-only still denies them. So a page
    # or a search result that says "save this" cannot have it saved behind the user's back.
    asks_when_tainted: ClassVar[bool] = False
    # Tools that record their work durably by call (ctx.turn, ctx.call_id) and pick it up
    # when run again (a paid generation polls the job it already started): a turn resumed
    # after a crash runs their unfinished calls again, with the same tool_use_id, instead
    # of recording them "interrupted" (engine/agent/turn.py).
    resumable: ClassVar[bool] = False

    def spec(self) -> ToolSpec:
        """What the model is told about this tool: built once and reused by every request
        that offers it, built again only when the description or the schema object
        changes (a tool may word its description from the current state)."""
        description, schema = self.description, self.input_schema
        cached: ToolSpec | None = self.__dict__.get("_spec")
        if (
            cached is not None
            and cached.input_schema is schema
            and cached.description == description
        ):
            return cached
        spec = ToolSpec(self.name, description, schema)
        self.__dict__["_spec"] = spec
        return spec

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path] | None:
        """The paths a call touches (None for tools without paths)."""
        return None

    def risk_for(self, args: dict[str, Any], ctx: ToolContext) -> Risk:
        """The risk of this particular call (some tools vary by argument)."""
        return self.risk

    def hardline_input(self, args: dict[str, Any]) -> str | None:
        """Command text to check against the hardline blocklist (exec-like tools)."""
        return None

    def refuse(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        """A tool-specific refusal reason, checked before the permission policy."""
        return None

    def refuse_input(self, args: dict[str, Any]) -> str | None:
        """A refusal of input the schema would also reject, checked before it, so the
        model reads why (schedule_create's command) rather than a schema error."""
        return None

    def confirm_reason(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """Why this call needs a human's yes in every mode that would run it, or "".
        Never a reviewer's, never a grant for the session; denied when no one attends
        (Home Assistant's confirm domains)."""
        return ""

    async def confirm(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """`confirm_reason` for a tool that must look first (the computer asks its desktop
        which app is in front, for `confirm_apps`); the registry awaits this one."""
        return self.confirm_reason(args, ctx)

    def taints_turn(self, args: dict[str, Any], ctx: ToolContext) -> bool:
        """Whether this call, once it runs, taints the turn (see `taints`)."""
        if self.taints is not None:
            return self.taints
        return self.risk_for(args, ctx) is Risk.NETWORK

    def title(self, args: dict[str, Any]) -> str:
        """A short summary of the call for cards and approval prompts."""
        for key in ("command", "path", "url", "pattern"):
            if isinstance(args.get(key), str):
                return str(args[key])[:200]
        return json.dumps(args, ensure_ascii=False)[:200]

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Do the work. Raise ToolError for a failure the model should read."""


class NativeTool(Tool):
    """A tool the provider declares itself (Anthropic's computer tool), offered in place
    of the function tools of the toolset `replaces` when every model of the chain has it
    (engine/agent/native.py). Its calls take the same path as any other."""

    replaces: ClassVar[str]

    @abstractmethod
    async def declared(self, home: Path, agent: str) -> NativeComputer | None:
        """What the request declares for `agent` (the display the model is shown), or
        None when the function tools must stay (the desktop cannot be reached)."""


def _validate(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


class ToolRegistry:
    """Tools by name and toolset, and the one path every call takes."""

    def __init__(self, *, hardline: Hardline | None = None, inline_budget: int = 32_000):
        self._tools: dict[str, Tool] = {}
        self._toolsets: dict[str, list[str]] = {}
        self._natives: dict[str, NativeTool] = {}  # by the toolset each replaces
        self.hardline = hardline
        self.inline_budget = inline_budget
        self.grants = SessionGrants()
        # engine.hooks.Hooks: tool_before guards the run, tool_after is fired after it.
        self.hooks: Any = None
        self.mutators = MUTATORS
        # What the toolsets hold open (the computer's desktops), stopped by `close`.
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Have `close` await `closer` (a toolset's desktops, browsers...)."""
        self._closers.append(closer)

    async def close(self) -> None:
        """Stop what the toolsets hold open; one that fails does not stop the others."""
        closers, self._closers = self._closers, []
        for ended in await asyncio.gather(*(c() for c in closers), return_exceptions=True):
            if isinstance(ended, Exception):
                log.warning("a toolset failed to close: %s", ended)

    def register(self, tool: Tool, toolset: str = "core") -> None:
        self._tools[tool.name] = tool
        self._toolsets.setdefault(toolset, [])
        if tool.name not in self._toolsets[toolset]:
            self._toolsets[toolset].append(tool.name)

    def register_native(self, tool: NativeTool) -> None:
        """Register a provider's native tool: callable by its name, offered only in place
        of its toolset (never by `tools_for`)."""
        self._tools[tool.name] = tool
        self._natives[tool.replaces] = tool

    def native(self, toolset: str) -> NativeTool | None:
        """The native tool that may stand in for `toolset`, or None."""
        return self._natives.get(toolset)

    def toolset(self, name: str) -> list[str]:
        """The names of the tools of the toolset `name`."""
        return list(self._toolsets.get(name, ()))

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def tools_for(self, toolsets: list[str]) -> list[Tool]:
        """The tools of the given toolsets, sorted by name (a stable cache prefix)."""
        names = {n for ts in toolsets for n in self._toolsets.get(ts, [])}
        return [self._tools[n] for n in sorted(names)]

    async def call(self, use: ToolUseBlock, ctx: ToolContext, allowed: set[str]) -> ToolResultBlock:
        """Decide and run one call; always returns its result block."""
        return (await self.call_with_media(use, ctx, allowed)).result

    async def call_with_media(
        self, use: ToolUseBlock, ctx: ToolContext, allowed: set[str]
    ) -> CallResult:
        """Decide and run one call: its result block, and the images it attached when it
        succeeded (a failed or denied call's are dropped: they show nothing trustworthy)."""
        clock = _CallClock(time.monotonic())
        tool = self.get(use.tool) if use.tool in allowed else None
        try:
            title = tool.title(use.input) if tool else use.tool
        except Exception:
            title = use.tool  # an input the summary cannot show must not stop the call
        ctx.bus.publish(
            ToolStarted(
                session=ctx.session,
                call_id=use.tool_use_id,
                tool=use.tool,
                title=title,
                input=use.input,
            )
        )
        try:
            output = await self._decide_and_run(tool, use, ctx, clock)
        except ToolError as exc:
            output = ToolOutput(str(exc), is_error=True)
        except Exception as exc:
            # Whatever the input did to the decision or the run (a NUL byte in a path, a
            # path too long, a recursion), the call ends with a result that says why and
            # the turn goes on; only a crash of the process leaves a call "interrupted".
            output = ToolOutput(failure_text(use.tool, exc), is_error=True)
        except asyncio.CancelledError:
            status: Outcome = "interrupted" if use.tool_use_id in ctx.ran else "not_run"
            ctx.bus.publish(
                ToolEnded(
                    session=ctx.session,
                    call_id=use.tool_use_id,
                    tool=use.tool,
                    is_error=True,
                    status=status,
                    seconds=clock.seconds() if status == "interrupted" else None,
                    preview=status.replace("_", " "),
                )
            )
            raise
        result = await self._spill(use, output, ctx.blobs)
        if tool is not None and self.hooks is not None:
            self.hooks.fire(
                "tool_after",
                tool.name,
                {
                    **_hook_data(tool.name, use.input, ctx),
                    "is_error": result.is_error,
                    "output": result.text[:4000],
                },
            )
        ctx.bus.publish(
            ToolEnded(
                session=ctx.session,
                call_id=use.tool_use_id,
                tool=use.tool,
                is_error=result.is_error,
                status=output.outcome,
                seconds=clock.seconds(),
                preview=result.text[:500],
            )
        )
        media = list(output.media) if output.outcome == "ok" else []
        return CallResult(result, media)

    async def _decide_and_run(
        self, tool: Tool | None, use: ToolUseBlock, ctx: ToolContext, clock: _CallClock
    ) -> ToolOutput:
        if tool is None:
            return ToolOutput(f"unknown tool {use.tool!r}", is_error=True)
        args = use.input if isinstance(use.input, dict) else {}
        refused = tool.refuse_input(args)
        if refused:
            return ToolOutput(f"refused: {refused}", True, denied=True)
        problem = _validate(tool.input_schema, args)
        if problem:
            return ToolOutput(f"bad arguments for {tool.name}: {problem}", is_error=True)
        command = tool.hardline_input(args)
        if command is not None and self.hardline is not None:
            reason = self.hardline(command)
            if reason:
                return ToolOutput(f"refused (hardline): {reason}", True, denied=True)
        refusal = tool.refuse(args, ctx)
        if refusal:
            return ToolOutput(f"refused: {refusal}", True, denied=True)
        paths = tool.paths(args, ctx)
        for path in paths or ():
            check_path(path)  # a NUL byte or a path too long ends the call here, saying so
        owned = self._knowledge(tool, paths, ctx)
        if owned:
            return ToolOutput(owned, is_error=True, denied=True)
        if tool.writes_files and not ctx.files_here:
            return ToolOutput(_REMOTE_WRITE.format(tool=tool.name), is_error=True, denied=True)
        secret = self._credential(tool, paths, ctx)
        if secret is not None:
            return ToolOutput(
                f"refused: {secret} is one of Habakkuk's credential files; {tool.name} may "
                "read it only in full mode",
                is_error=True,
                denied=True,
            )
        within = _within(paths, ctx)
        verdict = decide(
            ctx.mode,
            tool.risk_for(args, ctx),
            paths_inside_workspace=within,
            own_state=tool.own_state,
            network_in_workspace=tool.network_in_workspace,
        )
        note = ""
        if verdict == "deny":
            return ToolOutput(
                f"denied: {tool.name} is not allowed in {ctx.mode} mode", True, denied=True
            )
        tainted = tool.asks_when_tainted and ctx.taint.tainted
        confirm = await tool.confirm(args, ctx)
        if confirm:
            decision = await self._ask(tool, args, use.tool_use_id, ctx, human=confirm)
            clock.restart()
            if not decision.allowed:
                why = f": {decision.reason}" if decision.reason else ""
                return ToolOutput(f"denied by {decision.by}{why}", True, denied=True)
        elif (verdict == "ask" and not self.grants.allows(ctx.session, tool.name)) or tainted:
            decision = await self._ask(tool, args, use.tool_use_id, ctx)
            clock.restart()  # the call's time is its own, not the wait for a human
            if not decision.allowed:
                why = f": {decision.reason}" if decision.reason else ""
                return ToolOutput(f"denied by {decision.by}{why}", True, denied=True)
            if decision.answer == "allow_session":
                self.grants.grant(ctx.session, tool.name)
            if decision.by == "reviewer":
                note = f"\n[approved by the reviewer: {decision.reason}]"
        if self.hooks is not None:
            reason = await self.hooks.guard(
                "tool_before", tool.name, _hook_data(tool.name, args, ctx)
            )
            if reason:
                return ToolOutput(f"blocked by a tool_before hook: {reason}", True, denied=True)
        if ctx.checkpoint is not None and self._mutates(tool, paths, ctx):
            await ctx.checkpoint()
        ctx.ran.add(use.tool_use_id)
        if tool.taints_turn(args, ctx):
            ctx.taint.mark(tool.name)  # before it runs: a parallel call sees it too
        # A per-call copy (ran and taint stay shared with the turn's context).
        ctx = dataclasses.replace(ctx, confined=bool(within), call_id=use.tool_use_id)
        output = await tool.run(args, ctx)  # call() turns what it raises into a result
        if note:  # the rest of the output (its media) stays as the tool made it
            output = dataclasses.replace(output, text=output.text + note)
        return output

    def may_mutate(self, use: ToolUseBlock, ctx: ToolContext, allowed: set[str]) -> bool:
        """Whether the call may change the workspace (so the turn snapshots it first).

        The turn asks before it starts a batch of parallel calls, so no call of the
        batch runs while the snapshot is taken; `call` checks again for safety.
        """
        try:
            return self._may_mutate(use, ctx, allowed)
        except Exception:
            return False  # the call itself will fail and say why; it changes nothing

    def _may_mutate(self, use: ToolUseBlock, ctx: ToolContext, allowed: set[str]) -> bool:
        tool = self.get(use.tool) if use.tool in allowed else None
        if tool is None or ctx.mode == "read-only" or not isinstance(use.input, dict):
            return False
        if _validate(tool.input_schema, use.input) is not None:
            return False
        paths = tool.paths(use.input, ctx)
        if not self._mutates(tool, paths, ctx):
            return False
        # A call that will be refused or denied changes nothing: no snapshot for it.
        command = tool.hardline_input(use.input)
        if command is not None and self.hardline is not None and self.hardline(command):
            return False
        if tool.refuse(use.input, ctx) or self._credential(tool, paths, ctx) is not None:
            return False
        if self._knowledge(tool, paths, ctx) or (tool.writes_files and not ctx.files_here):
            return False
        within = _within(paths, ctx)
        verdict = decide(
            ctx.mode,
            tool.risk_for(use.input, ctx),
            paths_inside_workspace=within,
            own_state=tool.own_state,
            network_in_workspace=tool.network_in_workspace,
        )
        return verdict == "allow" or (verdict == "ask" and ctx.approver is not None)

    def _credential(self, tool: Tool, paths: list[Path] | None, ctx: ToolContext) -> Path | None:
        """The first of the home's credential files a reading call would read below full mode."""
        if ctx.mode == "full" or not tool.reads_files:
            return None
        for path in paths or ():
            kind = home_file(path, ctx.home, workspace=ctx.workspace, agent=ctx.agent)
            if kind is HomeFile.CREDENTIAL:
                return path
        return None

    @staticmethod
    def _knowledge(tool: Tool, paths: list[Path] | None, ctx: ToolContext) -> str:
        """Why a file-writing call is refused: a path is an agent's memory or skills,
        which only their own tools write (with the secret check and the scan); "" if not.
        Every mode, full included: the checks are what make those files trusted."""
        if not tool.writes_files:
            return ""
        for path in paths or ():
            owned = knowledge_file(path, ctx.home)
            if owned is not None:
                return owned.refusal(path, tool.name)
        return ""

    def _mutates(self, tool: Tool, paths: list[Path] | None, ctx: ToolContext) -> bool:
        if tool.name not in self.mutators or not paths:
            return False
        return any(inside(p, ctx.workspace) for p in paths)

    async def _ask(
        self, tool: Tool, args: dict[str, Any], call_id: str, ctx: ToolContext, human: str = ""
    ) -> ApprovalDecision:
        """Ask the turn's approver; with `human` (why), only a human, whatever it says."""
        # Why a write that usually runs unasked asks: the turn read outside content.
        why = f" ({human})" if human else ""
        if tool.asks_when_tainted and ctx.taint.tainted:
            why += f" (this turn read outside content: {ctx.taint.reason})"
        approver = human_of(ctx.approver) if human else ctx.approver
        if approver is None:
            return ApprovalDecision(
                "deny",
                f"needs approval{why} and nobody can approve in an unattended run",
                by="policy",
            )
        summary = tool.title(args) + why
        request = ApprovalRequest(
            agent=ctx.agent,
            session=ctx.session,
            turn=ctx.turn,
            tool=tool.name,
            input=args,
            summary=summary,
            call_id=call_id,
        )
        decision = await approver.approve(request)
        if human and decision.answer == "allow_session":
            decision = ApprovalDecision("allow_once", decision.reason, decision.by)  # every call
        return decision

    async def _spill(
        self, use: ToolUseBlock, output: ToolOutput, blobs: BlobStore
    ) -> ToolResultBlock:
        text = output.text
        if len(text) > self.inline_budget:
            path = await blobs.put(text.encode("utf-8"), ".txt")
            preview = text[: self.inline_budget // 4]
            text = (
                f"{preview}\n…\n[output was {len(output.text):,} characters; the full output is"
                f" saved at {path}; read it with read_file and an offset]"
            )
        return ToolResultBlock(use.tool_use_id, text, output.is_error)


MAX_ERROR_CHARS = 500

# Errors whose cause is the call's input, not a bug: said plainly, not logged as a crash.
_INPUT_ERRORS = (OSError, ValueError, TypeError, UnicodeError, OverflowError, RecursionError)


def failure_text(tool: str, exc: BaseException) -> str:
    """The one-line result for a call that raised `exc`: the tool and why, bounded."""
    if isinstance(exc, RecursionError):
        why = "the input nests too deeply to handle (recursion limit reached)"
    elif isinstance(exc, ValueError) and "null byte" in str(exc):
        why = "a path or argument contains a null byte (\\0), which no file name can hold"
    elif isinstance(exc, OSError) and exc.strerror:
        name = f": {_shorten(str(exc.filename))}" if exc.filename is not None else ""
        why = f"{exc.strerror}{name}"
    elif isinstance(exc, _INPUT_ERRORS):
        why = str(exc) or type(exc).__name__
    else:
        # A bug in a tool must still leave the model a result, never a broken turn.
        log.error("tool %s failed unexpectedly", tool, exc_info=exc)
        return _one_line(f"{tool} failed unexpectedly: {type(exc).__name__}: {exc}")
    return _one_line(f"{tool} failed: {why}")


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _one_line(text: str) -> str:
    """Bound an error text: a 100 KB path in a message helps no one."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}… [{len(text):,} characters in all]"


class _CallClock:
    """When a call's own time began: its start, or the moment its approval came back."""

    __slots__ = ("began",)

    def __init__(self, began: float) -> None:
        self.began = began

    def restart(self) -> None:
        self.began = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self.began


def _within(paths: list[Path] | None, ctx: ToolContext) -> bool | None:
    """Whether every path is inside the workspace and none is one of the home's own files
    (None for a tool without paths)."""
    if paths is None:
        return None
    return all(
        inside(p, ctx.workspace)
        and home_file(p, ctx.home, workspace=ctx.workspace, agent=ctx.agent) is None
        for p in paths
    )


def _hook_data(tool: str, args: Any, ctx: ToolContext) -> dict[str, Any]:
    """What tool hooks get on stdin (besides the event name)."""
    return {
        "agent": ctx.agent,
        "session": ctx.session,
        "turn": ctx.turn,
        "tool": tool,
        "input": args,
        "workspace": str(ctx.workspace),
    }
