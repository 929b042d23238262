"""The turn loop: one turn job from the user's message to the final reply.

1. Append the user's message (once, even when the job is resumed).
2. Load the transcript and repair it; record "interrupted" results for calls a
   crash left without one, except calls of resumable tools (a paid generation), which
   run again with their own tool_use_id and pick up the job they recorded.
3. If the last message needs a model reply, call the model through the router
   and append the assistant message.
4. If the reply has tool calls, run them in parallel and append all results in
   one message, followed by the images the calls attached; go to 3. If the
   provider paused its hosted tools' work (`pause_turn`), the paused message is
   appended as it came (with the pause mark, llm/hosted.py) and the conversation
   is sent again so the provider resumes, at most MAX_PAUSES times in a row.
   Otherwise the turn is done.

Every append checks the job's lease in its own transaction; the final reply's also
completes the job. A stopped turn leaves a result for every call it started.

The job's payload is a TurnRequest (requests.py). A sub-turn (a delegated child: its
request's `subturn` options) may override the toolsets (the child gets those of the list
its agent also has, never "delegate": a sub-agent cannot delegate further), the model
(tried before the agent's chain), the workspace (its git worktree) and an output_schema
(its final answer must end with matching JSON: one mismatch appends a correction message
and the loop goes on, a second fails the turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..channel_config import origin_taint
from ..config import (
    AgentConfig,
    Config,
    ModelRef,
    Thinking,
    default_compact_at,
    resolve_compact_at,
    thinking_level,
)
from ..errors import HabakkukError
from ..events import (
    Compacted,
    EventBus,
    ModelReplied,
    ToolArgsStreamed,
    ToolCallStreamed,
    TurnEnded,
    TurnReset,
    TurnStarted,
    TurnStatus,
    TurnText,
    TurnThinking,
)
from ..home import Home
from ..hook_events import HookEvent
from ..hooks import Hooks
from ..i18n import use_language
from ..jobs import Lease
from ..llm.budget import turn_error
from ..llm.hosted import PAUSE_STOP, is_hosted, is_paused, pause_mark, without_sources
from ..llm.provider import ProviderError
from ..llm.router import Caller, Router, RouterResult
from ..llm.types import (
    Block,
    ContextBlock,
    Message,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolResultBlock,
    ToolUseBlock,
)
from ..personas import persona_text
from ..pools import PermanentJobError
from ..sessions import INTERRUPTED, Session, TranscriptStore, TranscriptView
from ..state import StateStore, TurnState, read_turn_state
from ..store import BlobStore
from ..toolkit.approvals import Approver
from ..toolkit.registry import CallResult, ToolContext, ToolRegistry
from ..toolkit.taint import Taint
from .compaction import CompactionOutcome, compact, estimate_request_tokens, estimate_tokens
from .guidance import Steering
from .native import native_tools
from .prompt import user_message
from .requests import TURN_KIND, ReplyTo, TurnRequest, request_of
from .titles import title_queuing, titled_origin

log = logging.getLogger(__name__)

__all__ = ["TURN_KIND", "TurnDeps", "TurnRequest", "TurnRunner"]

STOPPED = "interrupted: the user stopped the turn before this tool call finished"
NOT_RUN = "not run: the user stopped the turn before this tool call started"
# Sessions whose last prompt size this runner remembers (for the compaction check).
REMEMBERED_PROMPTS = 4096
# The ContextBlock kind of an output_schema correction: in the transcript, so a rerun after
# a crash sees it was sent and never asks twice.
CORRECTION_KIND = "output_schema"
DELEGATE_TOOLSET = "delegate"
# Paused hosted-tool turns resent in a row before the turn ends with what it has.
MAX_PAUSES = 5

ApproverFor = Callable[[Session, TurnRequest], Approver | None]
Snapshot = Callable[[], Awaitable[None]]
# (agent, session, task) -> a function that snapshots the workspace, or None for no checkpoints
CheckpointFor = Callable[[AgentConfig, Session, str], Snapshot | None]


class OutputCheck(Protocol):
    """How a sub-turn's final answer is checked against its output_schema."""

    def problems(self, schema: dict[str, Any], text: str) -> tuple[Any, list[str]]:
        """(the answer's final JSON, why it does not match: [] when it does)."""
        ...

    def correction(self, errors: list[str]) -> str:
        """The message that asks the model to try again."""
        ...


class ToolView(Protocol):
    """Which of an agent's tools to offer at each model call (tool search)."""

    def __call__(
        self, agent: AgentConfig, tools: list[Any], messages: list[Message]
    ) -> list[Any]: ...

    def reachable(self, agent: AgentConfig, tools: list[Any]) -> set[str]:
        """Tools a call may name before they are offered (it offers them from then on)."""
        ...

    def carry(self, folded: Sequence[Message]) -> str:
        """What a compaction adds to its summary so the offer survives the fold ('' if nothing)."""
        ...


@dataclass
class TurnDeps:
    """The services a turn uses, handed in by the runtime."""

    config: Config
    home: Home
    transcripts: TranscriptStore
    router: Router
    tools: ToolRegistry
    bus: EventBus
    blobs: BlobStore
    approver_for: ApproverFor
    # The tools hold the services of the layers above (bound when the runtime built their
    # toolsets: engine/toolkit/service_tool.py); a turn hands them only the call.
    hooks: Hooks | None = None
    state: StateStore | None = None
    checkpoint_for: CheckpointFor | None = None
    tool_view: ToolView | None = None
    output_check: OutputCheck | None = None  # sub-turns with an output_schema need one


def once_per_turn(snapshot: Snapshot, label: str) -> Snapshot:
    """Run `snapshot` at most once, even when parallel calls ask at the same moment.

    A failed snapshot is logged and not retried: the tool call goes ahead.
    """
    lock = asyncio.Lock()
    done = False

    async def run() -> None:
        nonlocal done
        async with lock:
            if done:
                return
            done = True
            try:
                await snapshot()
            except Exception as exc:
                log.warning("checkpoint before %s failed: %s", label, exc)

    return run


class TurnRunner:
    """Runs turn jobs; the pool calls `run(lease)`."""

    def __init__(self, deps: TurnDeps):
        self.deps = deps
        self._steering = Steering(deps.transcripts.state_schema if deps.state else None)
        self._ready_workspaces: set[str] = set()
        # session -> (prompt tokens of its last model call, messages sent, view marker)
        self._prompts: OrderedDict[str, tuple[int, int, int]] = OrderedDict()

    async def run_to_done(self, lease: Lease) -> dict[str, Any]:
        """The turn pool's handler: `run` on the job's own request, with the job completed
        in the final reply's transaction (for a handler whose result nothing adds to after
        it returns)."""
        return await self.run(lease, request_of(lease.job), completes=True)

    async def run(
        self, lease: Lease, request: TurnRequest, *, completes: bool = False
    ) -> dict[str, Any]:
        """Run `request` as the job of `lease` to its reply (a card's or a sub-turn's
        handler hands in the request it made of its own payload). With `completes`, the
        final reply's append also completes the job (one trip less); else the caller
        settles it."""
        deps = self.deps
        job = lease.job
        session_id = request.session

        def guard(conn: Any) -> None:
            lease.check(conn, "control")

        if request.compact:
            return await self._compact_job(lease, session_id, guard, request.reply_to)
        typed = request.text
        first = user_message(typed, deps.config.timezone) if typed else None
        if first is not None and request.blocks:
            # Attachments a channel message carried (images, PDFs), stored by blob reference.
            first.blocks[1:1] = list(request.blocks)
        session, view, agent, state = await self._open(session_id, job.id, first, guard)
        deps.bus.publish(TurnStarted(session=session_id, turn=job.id, agent=agent.name))
        self._fire("turn_start", agent.name, {"session": session_id, "turn": job.id, "text": typed})
        try:
            reply = await self._loop(
                lease,
                request,
                session,
                agent,
                guard,
                view,
                _thinking(agent, state),
                request_chain(deps.config, request, session_chain(deps.config, agent, state)),
                completes=completes,
                persona=await _persona(deps.home, session_id, state),
            )
        except asyncio.CancelledError:
            self._end(agent.name, session_id, job.id, status="stopped")
            raise
        except ProviderError as exc:  # a spending limit's (BudgetPaused) ends with its message
            self._end(agent.name, session_id, job.id, status="failed", error=str(exc))
            raise PermanentJobError(turn_error(exc, request.reply_to)) from None
        except PermanentJobError as exc:
            self._end(agent.name, session_id, job.id, status="failed", error=str(exc))
            raise
        self._end(agent.name, session_id, job.id, status="done", reply=reply)
        if output_schema(request) is not None:
            # The reply is the validated JSON itself (checked in _final).
            _, value = _json_of(reply)
            return {"session": session_id, "reply": reply, "output": value}
        return {"session": session_id, "reply": reply}

    async def _open(
        self, session_id: str, turn: str, first: Message | None, guard: Any
    ) -> tuple[Session, TranscriptView, AgentConfig, TurnState | None]:
        """The turn's opening transaction (with the session's state read in it when
        state.db is attached to transcripts.db's connection, as the runtime opens them),
        then its agent; PermanentJobError if either is gone."""
        deps = self.deps
        schema = deps.transcripts.state_schema if deps.state is not None else None
        read: list[TurnState] = []
        if deps.state is not None and schema is None:
            read.append(await deps.state.turn_state(session_id))  # not attached: its own trip

        def message(conn: Any) -> Message | None:
            if schema is not None:
                read.append(read_turn_state(conn, session_id, schema))
            note = read[0].todo_note if read else None
            # Guidance a stopped turn never took and open todo items ride along with the
            # message, so the transcript stays append-only.
            extra = self._steering.opening(conn, session_id, turn) if first else []
            extra += [ContextBlock(note, "todo")] if note else []
            return replace(first, blocks=[*first.blocks, *extra]) if first and extra else first

        opened = await deps.transcripts.open_turn(session_id, turn, message, guard)
        if opened is None:
            raise PermanentJobError(f"session {session_id} does not exist")
        session, view = opened
        try:
            agent = deps.config.agent(session.agent)
        except HabakkukError as exc:
            raise PermanentJobError(str(exc)) from None
        return session, view, agent, read[0] if read else None

    def _end(
        self,
        agent: str,
        session: str,
        turn: str,
        status: TurnStatus,
        *,
        reply: str = "",
        error: str = "",
    ) -> None:
        event = TurnEnded(session=session, turn=turn, status=status, reply=reply, error=error)
        self.deps.bus.publish(event)
        # The hook gets what it got before: only the fields this ending has.
        data: dict[str, str] = {"status": status}
        if status == "done":
            data["reply"] = reply
        elif status == "failed":
            data["error"] = error
        self._fire("turn_end", agent, {"session": session, "turn": turn, **data})

    def _fire(self, event: HookEvent, agent: str, data: dict[str, Any]) -> None:
        if self.deps.hooks is not None:
            self.deps.hooks.fire(event, agent, {"agent": agent, **data})

    async def _loop(
        self,
        lease: Lease,
        turn_request: TurnRequest,
        session: Session,
        agent: AgentConfig,
        guard: Any,
        view: TranscriptView,
        thinking: Thinking,
        chain: list[ModelRef],
        *,
        completes: bool = False,
        persona: str = "",
    ) -> str:
        deps = self.deps
        job = lease.job
        task = turn_request.text
        toolsets = turn_toolsets(agent.toolsets, turn_request)
        native = await native_tools(
            deps.tools,
            deps.config,
            chain,
            toolsets,
            deps.tools.tools_for(toolsets),
            home=deps.home.root,
            agent=agent.name,
        )
        tools = native.tools  # the computer's function tools gone where the native one is
        allowed = {t.name for t in tools} | native.names
        # With tool search, each step offers its own list (below).
        specs = [t.spec() for t in tools] if deps.tool_view is None else []
        sub = turn_request.subturn
        where = sub.workspace if sub is not None else turn_request.workspace
        workspace = Path(where) if where else None
        context = ToolContext(
            agent=agent.name,
            session=session.id,
            turn=job.id,
            workspace=workspace or agent.workspace_path,
            mode=agent.mode,
            home=deps.home.root,
            blobs=deps.blobs,
            bus=deps.bus,
            approver=deps.approver_for(session, turn_request),
            task=task[:2000],
            exec_timeout=deps.config.tools.exec_timeout_seconds,
            timezone=deps.config.timezone,
            transcripts=deps.transcripts,
            state=deps.state,
            tool_catalog=tools if deps.tool_view is not None else None,
            stopped_by_user=lambda: lease.stop_reason == "user",
            files_here=agent.sandbox != "ssh",  # sandbox: ssh writes files there, with exec
        )
        context.taint = await _resumed_taint(deps, context, view)
        # A session an email channel started reads outside content in every turn.
        if started_tainted := origin_taint(session.origin, deps.config.channels):
            context.taint.mark(started_tainted)
        snapshot = deps.checkpoint_for(agent, session, task) if deps.checkpoint_for else None
        if snapshot is not None:
            context.checkpoint = once_per_turn(snapshot, f"turn {job.id}")
        if agent.name not in self._ready_workspaces:
            agent.workspace_path.mkdir(parents=True, exist_ok=True)
            self._ready_workspaces.add(agent.name)
        compact_at = resolve_compact_at(deps.config, agent)
        titled = session if _title_due(session, agent, view, turn_request, job.id) else None
        for step in range(agent.max_steps):
            if step:  # step 0 uses the view read in the turn's opening transaction
                view = await deps.transcripts.view(session.id)
            repaired = view.repaired()
            marker = _marker(view)
            if repaired.interrupted:
                resumed, ran_again = await self._resume_calls(
                    repaired.interrupted, context, allowed, lease
                )
                written = self._steering.results(tool_results_message(resumed), session.id, job.id)
                await deps.transcripts.append(session.id, written, turn_id=job.id, guard=guard)
                if ran_again or written.took:
                    # Calls ran again, or guidance steered in before a crash went with their
                    # results: the model reads those, not "interrupted".
                    view = await deps.transcripts.view(session.id)
                    repaired, marker = view.repaired(), _marker(view)
            messages = repaired.messages
            last = messages[-1] if messages else None
            if (
                last is not None
                and last.role == "assistant"
                and not last.tool_uses
                and not _resumes(messages)
            ):
                # Finished before a crash (or this step's reply): nothing left to do,
                # unless its output_schema asks once more.
                answer = _answer(messages)
                final = await self._final(session, job.id, turn_request, answer, guard)
                if final is not None:
                    return final
                continue
            if deps.tool_view is not None:
                # Tool search: the offered list may grow within the turn, never reorder.
                offered = deps.tool_view(agent, tools, messages)
                allowed = {t.name for t in offered} | deps.tool_view.reachable(agent, tools)
                allowed |= native.names
                specs = [t.spec() for t in offered]
            # Media another node stored (a PostgreSQL home): fetched to this one first.
            await deps.blobs.localise(block for message in messages for block in message.blocks)
            request = ModelRequest(
                model="",
                system=session.system_prompt,
                messages=messages,
                tools=specs,
                thinking=thinking,
                web=agent.web,
                persona=persona,
                computer=native.computer,
            )
            if compact_at > 0:
                size = self._prompt_size(session.id, marker, request)
                if size >= compact_at:
                    request, marker = await self._compacted(
                        lease, session, agent, chain, guard, request, marker, compact_at, size
                    )
            try:
                result = await self._call_model(chain, request, agent, session, job.id)
            except ProviderError as exc:
                if exc.error_class != "context_overflow" or compact_at <= 0:
                    raise
                # Too long for every model of the chain: compact once, even below
                # compact_at, and try again; a second overflow fails the turn.
                size = self._prompt_size(session.id, marker, request)
                shorter, marker = await self._compacted(
                    lease,
                    session,
                    agent,
                    chain,
                    guard,
                    request,
                    marker,
                    compact_at,
                    size,
                    overflow=True,
                )
                if shorter is request:
                    raise
                request = shorter
                result = await self._call_model(chain, request, agent, session, job.id)
            self._remember(session.id, result.usage.prompt_tokens, len(request.messages), marker)
            reply = result.message
            paused = result.stop_reason == PAUSE_STOP and not reply.tool_uses
            if paused:
                # Stored as it came, marked, so the next step (or a resumed turn) sends
                # the conversation again and the provider goes on where it stopped.
                reply = replace(reply, blocks=[*reply.blocks, pause_mark()])
            answer = _answer([*request.messages, reply])
            await self._append_reply(
                lease, turn_request, session, reply, answer, guard, completes and not paused, titled
            )
            deps.bus.publish(
                ModelReplied(
                    session=session.id,
                    turn=job.id,
                    model=str(result.model),
                    usage=dict(result.usage.__dict__),
                    stop_reason=result.stop_reason,
                )
            )
            if any(is_hosted(b) for b in reply.blocks):
                context.taint.mark("hosted web search")  # the provider's search results
            if paused:
                continue
            calls = reply.tool_uses
            if not calls:
                final = await self._final(session, job.id, turn_request, answer, guard)
                if final is not None:
                    return final
                continue
            results = await self._run_tools(calls, context, allowed, lease)
            written = self._steering.results(tool_results_message(results), session.id, job.id)
            await deps.transcripts.append(session.id, written, turn_id=job.id, guard=guard)
        raise PermanentJobError(
            f"turn stopped after {agent.max_steps} model calls (agents.{agent.name}.max_steps)"
        )

    async def _append_reply(
        self,
        lease: Lease,
        request: TurnRequest,
        session: Session,
        reply: Message,
        answer: str,
        guard: Any,
        completes: bool,
        titled: Session | None = None,
    ) -> None:
        """Append the model's reply. With `completes`, a final one (no tool calls, no
        output_schema to check) completes the job in the same transaction, with the
        result `run` returns (`answer`, the turn's reply text):
        the turn's last trip. A crash in its commit can leave the reply without the job
        done (transcripts.db commits first), never the reverse: the resumed turn then
        finds the reply and finishes without a model call. The final reply of `titled`'s
        first turn queues the session's title job in the same transaction (titles.py)."""
        job = lease.job
        if not completes or reply.tool_uses or output_schema(request) is not None:
            then = title_queuing(titled, reply)
            await self.deps.transcripts.append(
                session.id, reply, turn_id=job.id, guard=guard, then=then
            )
            return
        result = {"session": session.id, "reply": answer}
        write = asyncio.ensure_future(
            self.deps.transcripts.append(
                session.id,
                reply,
                turn_id=job.id,
                guard=guard,
                then=title_queuing(
                    titled,
                    reply,
                    lambda conn: self._steering.finish_in(
                        conn, lease, result, request, session.agent
                    ),
                ),
            )
        )
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            # A stop during the write: it runs to its end on the database thread anyway,
            # so learn whether the job is done before the pool reports how it ended.
            with contextlib.suppress(Exception):
                await write
            if write.done() and not write.cancelled() and write.exception() is None:
                job.status = "done"
            raise
        job.status = "done"  # committed: the pool has nothing left to settle

    async def _final(
        self, session: Session, turn: str, request: TurnRequest, text: str, guard: Any
    ) -> str | None:
        """The turn's reply, or None when its output_schema asked for another answer.

        A mismatch appends one correction (a context block marked CORRECTION_KIND) and the
        loop goes on; when the turn's transcript already has one, it fails the turn."""
        schema = output_schema(request)
        if schema is None:
            return text
        check = self.deps.output_check
        if check is None:
            raise PermanentJobError("this runner cannot check an output_schema")
        # The pages a hosted search cited are listed after the answer: not part of its JSON.
        value, errors = check.problems(schema, without_sources(text))
        if not errors:
            return _dumps(value)
        earlier = await self.deps.transcripts.turn_messages(session.id, turn)
        if any(_is_correction(m.message) for m in earlier):
            raise PermanentJobError(
                "the answer did not match output_schema twice: " + "; ".join(errors)
            )
        note = Message("user", [ContextBlock(check.correction(errors), CORRECTION_KIND)])
        await self.deps.transcripts.append(session.id, note, turn_id=turn, guard=guard)
        return None

    async def _call_model(
        self,
        chain: list[ModelRef],
        request: ModelRequest,
        agent: AgentConfig,
        session: Session,
        turn: str,
    ) -> RouterResult:
        """One model call down the chain, its stream published on the bus."""
        bus = self.deps.bus
        return await self.deps.router.complete(
            chain,
            request,
            caller=Caller(agent.name, session.id, turn=turn),
            on_event=lambda event, ref: publish_delta(self.deps.bus, session.id, turn, event),
            on_reset=lambda: bus.publish(TurnReset(session=session.id, turn=turn)),
        )

    # -- compaction -------------------------------------------------------------------------

    def _prompt_size(self, session_id: str, marker: int, request: ModelRequest) -> int:
        """The prompt `request` makes: the previous call's measured prompt plus what was
        added since (the reply, tool results), else an estimate of the whole request."""
        known = self._prompts.get(session_id)
        if known is not None and known[2] == marker and known[1] <= len(request.messages):
            return known[0] + estimate_tokens(request.messages[known[1] :])
        return estimate_request_tokens(request.system_text, request.tools, request.messages)

    def _remember(self, session_id: str, prompt: int, sent: int, marker: int) -> None:
        self._prompts.pop(session_id, None)
        if prompt > 0:  # a provider that reports no usage leaves it to the estimate
            self._prompts[session_id] = (prompt, sent, marker)
            while len(self._prompts) > REMEMBERED_PROMPTS:
                self._prompts.popitem(last=False)

    async def _compacted(
        self,
        lease: Lease,
        session: Session,
        agent: AgentConfig,
        chain: list[ModelRef],
        guard: Any,
        request: ModelRequest,
        marker: int,
        compact_at: int,
        size: int,
        *,
        overflow: bool = False,
    ) -> tuple[ModelRequest, int]:
        """Compact the session and return the request rebuilt on the new view (the same
        request and marker when nothing was compacted); `size` is the request's prompt."""
        deps = self.deps
        outcome = await compact(
            deps.transcripts,
            deps.router,
            session_id=session.id,
            chain=chain,
            caller=Caller(agent.name, session.id, "compaction", turn=lease.job.id),
            compact_at=compact_at,
            guard=guard,
            system=request.system_text,
            tools=request.tools,
            tokens_before=size,
            carry=deps.tool_view.carry if deps.tool_view is not None else None,
            # After an overflow the summary's input gets about half the prompt that
            # was too long, so the summary call itself fits.
            max_input_chars=max(size * 2, 20_000) if overflow else None,
        )
        if not outcome.compacted:
            log.info("session %s not compacted: %s", session.id, outcome.reason)
            return request, marker
        self._publish_compaction(session.id, lease.job.id, outcome)
        view = await deps.transcripts.view(session.id)
        return replace(request, messages=view.repaired().messages), _marker(view)

    def _publish_compaction(self, session: str, turn: str, outcome: CompactionOutcome) -> None:
        self.deps.bus.publish(
            Compacted(
                session=session,
                turn=turn,
                tokens_before=outcome.tokens_before,
                tokens_after=outcome.tokens_after,
                dropped=outcome.dropped,
            )
        )

    async def _compact_job(
        self, lease: Lease, session_id: str, guard: Any, reply_to: ReplyTo | None
    ) -> dict[str, Any]:
        """A /compact job: fold what the cut allows now, no user message, no model reply
        (its outcome said in `reply_language`)."""
        deps = self.deps
        job = lease.job
        session, view, agent, state = await self._open(session_id, job.id, None, guard)
        # Asked for by hand, it runs even where automatic compaction is off.
        compact_at = resolve_compact_at(deps.config, agent)
        if compact_at <= 0:
            compact_at = default_compact_at(deps.config, agent)
        tools = deps.tools.tools_for(agent.toolsets)
        if deps.tool_view is not None:
            tools = deps.tool_view(agent, tools, view.messages)
        chain = session_chain(deps.config, agent, state)
        deps.bus.publish(
            TurnStarted(session=session_id, turn=job.id, agent=agent.name, compact=True)
        )
        try:
            outcome = await compact(
                deps.transcripts,
                deps.router,
                session_id=session_id,
                chain=chain,
                caller=Caller(agent.name, session_id, "compaction"),
                compact_at=compact_at,
                guard=guard,
                system=session.system_prompt,
                tools=[t.spec() for t in tools],
                carry=deps.tool_view.carry if deps.tool_view is not None else None,
            )
        except asyncio.CancelledError:
            deps.bus.publish(TurnEnded(session=session_id, turn=job.id, status="stopped"))
            raise
        except ProviderError as exc:
            deps.bus.publish(
                TurnEnded(session=session_id, turn=job.id, status="failed", error=str(exc))
            )
            raise PermanentJobError(f"the summary call failed: {exc}") from None
        if outcome.compacted:
            self._publish_compaction(session_id, job.id, outcome)
        with use_language(reply_language(deps.config, reply_to)):
            reply = outcome.describe()
        deps.bus.publish(TurnEnded(session=session_id, turn=job.id, status="done", reply=reply))
        return {
            "session": session_id,
            "reply": reply,
            "compacted": outcome.compacted,
            "tokens_before": outcome.tokens_before,
            "tokens_after": outcome.tokens_after,
            "dropped": outcome.dropped,
        }

    async def _run_tools(
        self, calls: list[ToolUseBlock], context: ToolContext, allowed: set[str], lease: Lease
    ) -> list[CallResult]:
        """Run calls in parallel; on a stop, every call still gets a result."""
        if context.checkpoint is not None and any(
            self.deps.tools.may_mutate(call, context, allowed) for call in calls
        ):
            # Before the batch starts, so no call of it sees the workspace mid-snapshot.
            await context.checkpoint()
        tasks = [
            asyncio.create_task(
                self.deps.tools.call_with_media(call, context, allowed), name=call.tool
            )
            for call in calls
        ]
        try:
            return list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            results: list[CallResult] = []
            for call, task in zip(calls, tasks, strict=True):
                if task.done() and not task.cancelled() and task.exception() is None:
                    results.append(task.result())
                else:
                    # An interrupted call shows nothing, whatever it had attached.
                    stopped = STOPPED if call.tool_use_id in context.ran else NOT_RUN
                    results.append(CallResult(ToolResultBlock(call.tool_use_id, stopped, True)))
            await self._record_stop(context, results, lease)
            raise

    async def _resume_calls(
        self, calls: list[ToolUseBlock], context: ToolContext, allowed: set[str], lease: Lease
    ) -> tuple[list[CallResult], bool]:
        """Results for the calls a crash left without one: a resumable tool's call runs
        again with its own tool_use_id (it finds the work it recorded, such as a paid job
        to poll, and never starts it twice); any other call is recorded "interrupted".
        Also whether any call ran again. A call that ran again keeps its images."""
        again = [
            c
            for c in calls
            if c.tool in allowed
            and (tool := self.deps.tools.get(c.tool)) is not None
            and tool.resumable
        ]
        ran = iter(await self._run_tools(again, context, allowed, lease) if again else [])
        rerun = {c.tool_use_id for c in again}
        results = [
            next(ran)
            if c.tool_use_id in rerun
            else CallResult(ToolResultBlock(c.tool_use_id, INTERRUPTED, True))
            for c in calls
        ]
        return results, bool(again)

    async def _record_stop(
        self, context: ToolContext, results: list[CallResult], lease: Lease
    ) -> None:
        """Write the stopped calls' results while we still hold the lease.

        Only for a user's stop: after a shutdown the resumed turn's repair records
        them, and after a lost lease we must not write at all.
        """
        if lease.stop_reason != "user":
            return
        with contextlib.suppress(Exception):
            await self.deps.transcripts.append(
                context.session,
                tool_results_message(results),
                turn_id=context.turn,
                guard=lambda conn: lease.check(conn, "control"),
            )


async def _resumed_taint(deps: TurnDeps, context: ToolContext, view: TranscriptView) -> Taint:
    """A fresh run starts clean; a run resumed after a crash starts tainted when the
    turn's earlier messages show a network tool was called or hosted search used."""
    taint = Taint()
    # The opening view holds the turn's messages unless a compaction cut into them
    # (then they are read again): no extra query for the common, fresh run.
    earlier = [m for m in view.kept if m.turn_id == context.turn]
    if view.compaction is not None:
        earlier = await deps.transcripts.turn_messages(context.session, context.turn)
    for stored in earlier:
        if stored.role == "assistant":
            _mark_taint(taint, stored.message, deps.tools, context)
    return taint


def publish_delta(bus: EventBus, session: str, turn: str, event: StreamEvent) -> None:
    """Publish a streamed piece of the reply (text, thinking, a tool call's start or
    arguments) on the events bus."""
    if isinstance(event, TextDelta):
        bus.publish(TurnText(session=session, turn=turn, text=event.text))
    elif isinstance(event, ThinkingDelta):
        bus.publish(TurnThinking(session=session, turn=turn, text=event.text))
    elif isinstance(event, ToolCallStart):
        bus.publish(
            ToolCallStreamed(session=session, turn=turn, call_id=event.tool_use_id, tool=event.tool)
        )
    elif isinstance(event, ToolCallDelta):
        bus.publish(
            ToolArgsStreamed(
                session=session, turn=turn, call_id=event.tool_use_id, arguments=event.arguments
            )
        )


def reply_language(config: Config, reply_to: ReplyTo | None) -> str:
    """The language of what a job says to a person: the chat's it goes to (`reply_to`),
    else config.yaml's (the terminal's, `habakkuk run`'s); a job runs in no one's."""
    channel = reply_to.to.partition(":")[0] if reply_to is not None else ""
    return config.language_of(channel) if channel else config.language


def tool_results_message(calls: Sequence[CallResult]) -> Message:
    """The user message of a batch's results: every tool result first, then every image
    the calls attached, in call order (providers want a message's tool results before
    any other content; the images are stored by blob reference)."""
    blocks: list[Block] = [call.result for call in calls]
    blocks.extend(image for call in calls for image in call.media)
    return Message("user", blocks)


def _marker(view: TranscriptView) -> int:
    """Which compaction the view starts from (-1: none), so a prompt size measured on
    another view is not carried over."""
    return view.compaction.first_kept_seq if view.compaction else -1


def _resumes(messages: list[Message]) -> bool:
    """Whether the conversation ends in a paused message to send again: the provider
    paused (pause_turn) at most MAX_PAUSES times in a row so far."""
    paused = 0
    for message in reversed(messages):
        if not is_paused(message):
            break
        paused += 1
    return 0 < paused <= MAX_PAUSES


def _answer(messages: list[Message]) -> str:
    """The turn's reply: the text of the assistant messages at the end (one, unless the
    provider paused and resumed the answer)."""
    texts: list[str] = []
    for message in reversed(messages):
        if message.role != "assistant":
            break
        texts.append(message.text)
    return "".join(reversed(texts))


def _is_correction(message: Message) -> bool:
    return message.role == "user" and any(
        isinstance(b, ContextBlock) and b.kind == CORRECTION_KIND for b in message.blocks
    )


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _json_of(text: str) -> tuple[bool, Any]:
    import json

    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


def output_schema(request: TurnRequest) -> dict[str, Any] | None:
    """The JSON schema a sub-turn's final answer must match, or None."""
    schema = request.subturn.output_schema if request.subturn is not None else None
    return dict(schema) if schema is not None else None


def turn_toolsets(own: list[str], request: TurnRequest) -> list[str]:
    """The toolsets a turn offers: the agent's own; for a sub-turn, those of its
    `toolsets` (when given) the agent also has, and never the delegate toolset."""
    if request.subturn is None:
        return list(own)
    given = request.subturn.toolsets
    chosen = [t for t in own if given is None or t in given]
    return [t for t in chosen if t != DELEGATE_TOOLSET]


def request_chain(config: Config, request: TurnRequest, chain: list[ModelRef]) -> list[ModelRef]:
    """A sub-turn's `model` (provider/model, while its provider is configured) first,
    then `chain` without it."""
    choice = request.subturn.model if request.subturn is not None else None
    if not choice:
        return chain
    try:
        chosen = ModelRef.parse(choice)
    except ValueError:
        return chain
    if chosen.provider not in config.providers:
        return chain
    return [chosen, *(ref for ref in chain if ref != chosen)]


def session_chain(config: Config, agent: AgentConfig, state: TurnState | None) -> list[ModelRef]:
    """The models to try: the session's /model choice first (while its provider is
    configured), then the agent's model and fallbacks."""
    chain = list(agent.chain)
    choice = state.model if state is not None else None
    if not choice:
        return chain
    try:
        chosen = ModelRef.parse(choice)
    except ValueError:
        return chain
    if chosen.provider not in config.providers:
        return chain
    return [chosen, *(ref for ref in chain if ref != chosen)]


async def _persona(home: Home, session_id: str, state: TurnState | None) -> str:
    """The text of the session's /personality, read now (its file may have been edited
    since the last turn); "" for none. A persona whose file vanished is left out, and
    the model is told nothing of it (only the log is)."""
    name = state.personality if state is not None else None
    if not name:
        return ""
    text = await asyncio.to_thread(persona_text, home.root, name)
    if text is None:
        log.warning("session %s: persona %r is gone; the turn goes on without it", session_id, name)
        return ""
    return text


def _title_due(
    session: Session, agent: AgentConfig, view: TranscriptView, request: TurnRequest, turn: str
) -> bool:
    """Whether this turn's final reply queues the session's background title: the
    session's first answered turn (no other turn's reply in it), titled by its first
    message, with titles on for the agent; never a sub-turn's, nor a session a machine
    started (titles.UNTITLED_ORIGINS: board cards, schedules, webhooks, the API...).
    (The job's id is the session's, so a turn run again queues nothing new.)"""
    if not agent.title_chain or request.subturn is not None:
        return False
    if session.title_source != "first_message" or not titled_origin(session.origin):
        return False
    if view.compaction is not None:
        return False
    return not any(
        stored.turn_id not in ("", turn) and stored.message.role == "assistant"
        for stored in view.kept
    )


def _thinking(agent: AgentConfig, state: TurnState | None) -> Thinking:
    """The effort for this turn: the session's /think choice, else the agent's setting."""
    chosen = thinking_level(state.thinking) if state is not None else None
    return chosen or agent.thinking


def _mark_taint(taint: Taint, message: Message, tools: ToolRegistry, context: ToolContext) -> None:
    """Mark `taint` for each block of an assistant `message` that brought outside content
    in: a hosted web search, or a call of a tool that taints the turn."""
    for block in message.blocks:
        if is_hosted(block):
            taint.mark("hosted web search")
        elif isinstance(block, ToolUseBlock):
            tool = tools.get(block.tool)
            args = block.input if isinstance(block.input, dict) else {}
            with contextlib.suppress(Exception):  # a bad input decides nothing
                if tool is not None and tool.taints_turn(args, context):
                    taint.mark(tool.name)
