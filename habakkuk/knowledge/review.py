"""The memory_review and memory_nightly jobs: plan once, store, apply one by one.

Crash safety (spec 000 "Memory", "Crash safety"): a run's plan is stored in
review_runs before any change is applied; each applied change is recorded; the end
writes one line to memory/.review.log (unless the job's line is there) and marks the
run done together with the session's review position. A resumed job finds its stored
plan, makes no model call, and continues at the first unrecorded change. Every change
is idempotent (saves replace by title, forgetting a missing note is a no-op, profile
appends skip text already there), so repeating the one in flight changes nothing.

Budget: the tokens of every call are stored on its run; past `review_budget` tokens
since the agent's local midnight, a job finishes as skipped with the reason.
Loops: a change that one of the agent's last runs already applied (the same content
for the same note or section, as when two answers alternate) is dropped, not fought over.
Scope: a job names one agent and writes only that agent's memory; a review whose
session belongs to another agent is refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from habakkuk.engine.config import ModelRef
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.jobs import Lease, payload_of
from habakkuk.engine.llm.router import Caller, Router
from habakkuk.engine.llm.types import Message, ModelRequest
from habakkuk.engine.pools import PermanentJobError
from habakkuk.engine.sessions import TranscriptStore

from .memory_types import (
    MemoryAccess,
    ProposalCreated,
    Provenance,
    SecretRefused,
    TaintRefused,
)
from .nightly import clusters, stale
from .review_kinds import NIGHTLIES, NIGHTLY_KIND, REVIEW_KIND, REVIEWS
from .review_plan import (
    ForgetChange,
    MergeChange,
    ParsedPlan,
    PlanChange,
    ProfileChange,
    SaveChange,
    fingerprint,
    parse_nightly,
    parse_review,
)
from .review_prompt import (
    NIGHTLY_SYSTEM,
    RELATED_SHOWN,
    REVIEW_SYSTEM,
    TITLES_SHOWN,
    ShownNote,
    nightly_input,
    render_conversation,
    review_input,
)
from .review_store import ReviewRun, ReviewStore, utc_now, utc_text

log = logging.getLogger(__name__)

REVIEW_LOG = ".review.log"
ANSWER_MAX_TOKENS = 4_096
SEARCH_CHARS = 2_000  # the newest user text searched for related notes


def review_job_id(session: str, length: int) -> str:
    return f"memrev_{session}_{length}"


def nightly_job_id(agent: str, date: str) -> str:
    return f"memnight_{agent}_{date}"


def serial_key(agent: str) -> str:
    return f"memory:{agent}"


@dataclass(frozen=True)
class ReviewSettings:
    """The `memory:` settings the review and the nightly pass use."""

    review: bool = False
    idle_seconds: float = 900.0
    model: ModelRef | None = None
    budget: int = 200_000
    nightly: str | None = "03:30"  # HH:MM local, None when off
    stale_days: int = 365
    timezone: str = "UTC"


@dataclass
class ReviewDeps:
    """What the jobs need; `store_for(agent)` is that agent's review tables."""

    memory: MemoryAccess
    store_for: Callable[[str], Awaitable[ReviewStore]]
    memory_dir: Callable[[str], Path]  # agents/<name>/memory
    transcripts: TranscriptStore
    router: Router
    chain_for: Callable[[str], list[ModelRef]]  # the agent's chain, main model first
    settings: Callable[[], ReviewSettings]
    read_state: Callable[[str], Awaitable[dict[str, str | None]]] | None = None
    vectors: Callable[[str], Awaitable[dict[str, Any]]] | None = None
    # Whether a session's origin makes all of it untrusted (an email inbox's).
    untrusted_origin: Callable[[str], bool] = lambda origin: False
    # What secret a text holds, or None (the service's check); a change holding one is
    # dropped before the plan is stored, so not even review_runs keeps it.
    secret_in: Callable[[str], str | None] | None = None


def review_chain(chain: list[ModelRef], review_model: ModelRef | None) -> list[ModelRef]:
    """review_model, or else the agent's last fallback with the rest of its chain behind."""
    if review_model is not None:
        return [review_model]
    if len(chain) <= 1:
        return list(chain)
    return [chain[-1], *chain[:-1]]


def day_start(settings: ReviewSettings, now: datetime | None = None) -> str:
    """The agent's local midnight today, as UTC text (the budget's day)."""
    zone = ZoneInfo(settings.timezone)
    local = (now or datetime.now(zone)).astimezone(zone)
    return utc_text(datetime.combine(local.date(), time(0), zone))


class ReviewJobs:
    """The two job handlers (run by a one-worker pool)."""

    def __init__(self, deps: ReviewDeps):
        self.deps = deps

    # -- memory_review ---------------------------------------------------------------

    async def review(self, lease: Lease) -> dict[str, Any]:
        asked = payload_of(lease.job, REVIEWS)
        agent, session_id, length = asked.agent, asked.session, asked.length
        store = await self.deps.store_for(agent)
        run = await store.run(lease.job.id)
        if run is None:
            run = await self._plan_review(lease.job.id, agent, session_id, length, store)
        return await self._carry_out(run, agent, store, position=length)

    async def _plan_review(
        self, run_id: str, agent: str, session_id: str, length: int, store: ReviewStore
    ) -> ReviewRun:
        settings = self.deps.settings()
        session = await self.deps.transcripts.get_session(session_id)
        if session is None:
            raise PermanentJobError(f"memory review: session {session_id} does not exist")
        if session.agent != agent:
            # Scope: a review of one agent's session writes only that agent's memory.
            raise PermanentJobError(
                f"memory review: session {session_id} belongs to {session.agent!r}, not {agent!r}"
            )
        skipped = await self._over_budget(agent, store, settings)
        if skipped:
            return await store.create_run(
                run_id, REVIEW_KIND, session_id, [], dropped={}, tokens=0, skipped=skipped
            )
        position = await store.position(session_id)
        stored = await self.deps.transcripts.messages(session_id, after=position - 1)
        messages = [m.message for m in stored if m.seq < length]
        rendered = render_conversation(messages)
        memory = self.deps.memory
        titles, _ = await memory.list_notes(agent, limit=TITLES_SHOWN)
        related = await self._related(agent, messages)
        profile = await memory.profile(agent)
        request = ModelRequest(
            model="",
            system=REVIEW_SYSTEM,
            messages=[
                Message.user_text(
                    review_input(
                        rendered,
                        titles=[(n.slug, n.title) for n in titles],
                        related=related,
                        profile=profile,
                    )
                )
            ],
            max_tokens=ANSWER_MAX_TOKENS,
        )
        chain = review_chain(self.deps.chain_for(agent), settings.model)
        result = await self.deps.router.complete(
            chain, request, caller=Caller(agent, session_id, "memory_review")
        )
        tokens = result.usage.prompt_tokens + result.usage.output_tokens
        untrusted = self.deps.untrusted_origin(session.origin)
        plan = parse_review(
            result.message.text,
            shown={n.slug for n in related},
            tool_output=rendered.has_tool_output,
            untrusted_session=untrusted,
        )
        self._drop_secrets(plan)
        await self._drop_repeats(plan, store)
        return await store.create_run(
            run_id,
            REVIEW_KIND,
            session_id,
            plan.changes,
            dropped=dict(plan.dropped),
            tokens=tokens,
        )

    async def _related(self, agent: str, messages: list[Message]) -> list[ShownNote]:
        """Up to 8 notes found by the conversation's newest user text, in full."""
        text = " ".join(m.text for m in messages if m.role == "user" and m.text)[-SEARCH_CHARS:]
        if not text.strip():
            return []
        hits = await self.deps.memory.search(agent, text, limit=RELATED_SHOWN)
        shown = []
        for hit in hits:
            try:
                note = await self.deps.memory.read(agent, hit.note.slug, mark_read=False)
            except NotFound:
                continue
            shown.append(ShownNote(note.slug, note.title, note.tags, note.body))
        return shown

    async def _over_budget(self, agent: str, store: ReviewStore, settings: ReviewSettings) -> str:
        spent = await store.tokens_since(day_start(settings))
        if spent >= settings.budget:
            return (
                f"the memory review budget of {settings.budget:,} tokens a day for {agent} "
                f"is spent ({spent:,} used today)"
            )
        return ""

    def _drop_secrets(self, plan: ParsedPlan) -> None:
        """Drop (and count) changes whose text looks like a secret, before storing them."""
        if self.deps.secret_in is None:
            return
        kept = []
        for change in plan.changes:
            if any(self.deps.secret_in(text) for text in _texts(change)):
                plan.dropped["looked like a secret"] += 1
            else:
                kept.append(change)
        plan.changes = kept

    async def _drop_repeats(self, plan: ParsedPlan, store: ReviewStore) -> None:
        """Drop changes one of the last runs already applied: repeating them is a loop."""
        seen = await store.recent_fingerprints()
        kept = []
        for change in plan.changes:
            if fingerprint(change) in seen:
                plan.dropped["repeated from an earlier run"] += 1
            else:
                kept.append(change)
        plan.changes = kept

    # -- memory_nightly --------------------------------------------------------------

    async def nightly(self, lease: Lease) -> dict[str, Any]:
        agent = payload_of(lease.job, NIGHTLIES).agent
        store = await self.deps.store_for(agent)
        run = await store.run(lease.job.id)
        if run is None:
            run = await self._plan_nightly(lease.job.id, agent, store)
        return await self._carry_out(run, agent, store, position=0)

    async def _plan_nightly(self, run_id: str, agent: str, store: ReviewStore) -> ReviewRun:
        settings = self.deps.settings()
        skipped = await self._over_budget(agent, store, settings)
        if skipped:
            return await store.create_run(
                run_id, NIGHTLY_KIND, "", [], dropped={}, tokens=0, skipped=skipped
            )
        memory = self.deps.memory
        notes, total = await memory.list_notes(agent, limit=1000)
        while len(notes) < total:  # a page at a time: the listing gives at most 1,000
            page, total = await memory.list_notes(agent, limit=1000, offset=len(notes))
            if not page:
                break
            notes += page
        vectors = await self.deps.vectors(agent) if self.deps.vectors is not None else None
        # Off the loop: comparing thousands of titles must not stall the terminal app.
        groups = await asyncio.to_thread(clusters, notes, vectors)
        changes: list[PlanChange] = []
        tokens = 0
        dropped: Counter[str] = Counter()
        if groups:
            shown = [
                [
                    ShownNote(
                        n.slug,
                        n.title,
                        n.tags,
                        (await memory.read(agent, n.slug, mark_read=False)).body,
                    )
                    for n in group
                ]
                for group in groups
            ]
            request = ModelRequest(
                model="",
                system=NIGHTLY_SYSTEM,
                messages=[Message.user_text(nightly_input(shown))],
                max_tokens=ANSWER_MAX_TOKENS,
            )
            chain = review_chain(self.deps.chain_for(agent), settings.model)
            result = await self.deps.router.complete(
                chain, request, caller=Caller(agent, "", "memory_nightly")
            )
            tokens = result.usage.prompt_tokens + result.usage.output_tokens
            for decision in parse_nightly(result.message.text, len(groups)):
                if not decision.merge:
                    dropped["cluster judged different"] += 1
                    continue
                secret = self.deps.secret_in
                if secret is not None and (secret(decision.title) or secret(decision.content)):
                    dropped["looked like a secret"] += 1
                    continue
                slugs = tuple(n.slug for n in groups[decision.cluster])
                trusted = not any(n.untrusted for n in groups[decision.cluster])
                changes.append(
                    MergeChange(slugs, decision.title, decision.content, decision.tags, trusted)
                )
        read_at = await self.deps.read_state(agent) if self.deps.read_state is not None else {}
        now = datetime.now(ZoneInfo(settings.timezone))
        merged = {s for c in changes if isinstance(c, MergeChange) for s in c.slugs}
        for note in stale(notes, read_at, now=now, stale_days=settings.stale_days):
            if note.slug not in merged:
                changes.append(
                    ForgetChange(note.slug, f"not updated or read for {settings.stale_days} days")
                )
        return await store.create_run(
            run_id,
            NIGHTLY_KIND,
            "",
            changes,
            dropped=dict(dropped),
            tokens=tokens,
            extra={"notes": total, "clusters": len(groups)},
        )

    # -- applying a stored plan ----------------------------------------------------

    async def _carry_out(
        self, run: ReviewRun, agent: str, store: ReviewStore, *, position: int
    ) -> dict[str, Any]:
        """Apply the stored plan from its first unrecorded change, then finish the run."""
        counts: Counter[str] = Counter()
        if not run.done:
            for index in range(run.applied, len(run.changes)):
                counts[await self._apply(agent, run, run.changes[index])] += 1
                await store.mark_applied(run.id, index + 1)
            summary = self._summary(run, counts)
            await asyncio.to_thread(self._log_line, agent, run.id, summary)
            await store.finish(run.id, run.session, position)
        result: dict[str, Any] = {
            "agent": agent,
            "planned": len(run.changes),
            "dropped": run.dropped,
            "tokens": run.tokens,
            "outcomes": dict(counts),
        }
        if run.skipped:
            result["skipped"] = run.skipped
        return result

    async def _apply(self, agent: str, run: ReviewRun, change: PlanChange) -> str:
        """One change, idempotently; the outcome's name (applied, no-op, secret, ...)."""
        memory = self.deps.memory
        by_review = Provenance(by="review", session=run.session, tool=run.kind)
        try:
            if isinstance(change, SaveChange | MergeChange):
                provenance = Provenance(
                    by="review",
                    session=run.session,
                    tool=run.kind,
                    tainted=not change.trusted,
                    note="merged " + ", ".join(change.slugs)
                    if isinstance(change, MergeChange)
                    else "",
                )
                saved = await memory.save(
                    agent,
                    change.title,
                    change.content,
                    tags=list(change.tags) if change.tags is not None else None,
                    provenance=provenance,
                )
                outcome = "no-op" if saved.unchanged else "applied"
                if isinstance(change, MergeChange):
                    forgotten = [
                        await self._forget(agent, slug, by_review)
                        for slug in change.slugs
                        if slug != saved.note.slug
                    ]
                    if "proposed to the user" in forgotten:
                        outcome = "merged; forgetting the rest proposed to the user"
                return outcome
            if isinstance(change, ProfileChange):
                if change.content in await memory.profile(agent):
                    return "no-op"
                await memory.update_profile(
                    agent, change.section, change.content, mode="append", provenance=by_review
                )
                return "applied"
            return await self._forget(agent, change.slug, by_review)
        except ProposalCreated:
            return "proposed to the user"
        except SecretRefused:
            log.info("memory review %s: a change that looked like a secret was dropped", run.id)
            return "secret dropped"
        except TaintRefused:
            return "refused (untrusted)"
        except HabakkukError as exc:
            log.info("memory review %s: a change was refused: %s", run.id, exc)
            return "refused"

    async def _forget(self, agent: str, slug: str, provenance: Provenance) -> str:
        """Forget a note (a no-op when it is gone); under review provenance the service
        turns it into a proposal for the user."""
        try:
            await self.deps.memory.forget(agent, slug, provenance=provenance)
        except NotFound:
            return "no-op"
        except ProposalCreated:
            return "proposed to the user"
        return "applied"

    @staticmethod
    def _summary(run: ReviewRun, counts: Counter[str]) -> str:
        parts = [f"{k}={v}" for k, v in sorted(counts.items())]
        parts += [f"dropped {k}={v}" for k, v in sorted(run.dropped.items())]
        if run.skipped:
            parts.append(f"skipped: {run.skipped}")
        return "; ".join(parts) or "nothing to change"

    def _log_line(self, agent: str, run_id: str, summary: str) -> None:
        """Append the run's line to memory/.review.log unless it is already there."""
        path = self.deps.memory_dir(agent) / REVIEW_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        marker = f" {run_id} "
        if path.exists():
            with path.open(encoding="utf-8") as handle:
                if any(marker in line for line in handle):
                    return
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{utc_now()} {run_id} {summary}\n")


def _texts(change: PlanChange) -> list[str]:
    if isinstance(change, SaveChange | MergeChange):
        return [change.title, change.content, *(change.tags or ())]
    if isinstance(change, ProfileChange):
        return [change.section, change.content]
    return []


def next_nightly(settings: ReviewSettings, now: datetime) -> datetime | None:
    """Today's nightly slot in local time if it has passed, else None (or when off)."""
    if settings.nightly is None:
        return None
    zone = ZoneInfo(settings.timezone)
    local = now.astimezone(zone)
    hour, minute = (int(p) for p in settings.nightly.split(":"))
    slot = datetime.combine(local.date(), time(hour, minute), zone)
    return slot if local >= slot else None


def is_recent(updated_at: float, now: float, *, days: float = 3.0) -> bool:
    return now - updated_at <= timedelta(days=days).total_seconds()
