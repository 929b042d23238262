"""The chat commands: every /command declared once, run against the runtime's services.

A surface (the terminal app, a channel, the web chat, `habakkuk run`) implements
`Conversation`: what one conversation is there (its session, its agent, who is
talking) and the few things only the surface can do (start a fresh session,
continue in another, queue a turn, send a file). `dispatch` parses
`/name[@bot] args`, runs the command and returns a `Reply` the surface shows.
`/help` and the terminal's completion and palette are generated from `COMMANDS`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from habakkuk.engine.errors import HabakkukError, shown
from habakkuk.engine.i18n import known, t

from .plugin_commands import PluginConversation

if TYPE_CHECKING:
    from habakkuk.engine.agent.turn_access import TurnsAccess
    from habakkuk.engine.budget_access import BudgetAccess
    from habakkuk.engine.config import Config
    from habakkuk.engine.jobs import Job
    from habakkuk.engine.llm.usage import UsageAccess, UsageTotal
    from habakkuk.engine.session_access import (
        CheckpointsAccess,
        SessionsAccess,
        SettingsAccess,
    )
    from habakkuk.engine.sessions import Session, StoredMessage
    from habakkuk.knowledge.memory_types import MemoryAccess
    from habakkuk.knowledge.skills.types import SkillsAccess

# "plain": `habakkuk chat --plain`, the line-mode chat (conversation/plain.py).
Surface = Literal["terminal", "chat", "web", "run", "plain"]
ANY: frozenset[Surface] = frozenset({"terminal", "chat", "web", "run", "plain"})
INTERACTIVE: frozenset[Surface] = frozenset({"terminal", "chat", "web", "plain"})
EXPORT_FORMATS = ("md", "json", "html")


class Services(Protocol):
    """What the commands need from the runtime: its services, each typed by its own
    Protocol (the Runtime implements it)."""

    config: Config

    @property
    def sessions(self) -> SessionsAccess: ...

    @property
    def turns(self) -> TurnsAccess: ...

    @property
    def settings(self) -> SettingsAccess: ...

    @property
    def checkpointing(self) -> CheckpointsAccess: ...

    @property
    def ledger(self) -> UsageAccess: ...

    @property
    def budget(self) -> BudgetAccess:
        """The spending limits (/budget: conversation/budget_commands.py)."""
        ...

    @property
    def memory(self) -> MemoryAccess:
        """The agents' memory (/remember, /forget)."""
        ...

    @property
    def skills(self) -> SkillsAccess:
        """The home's skills (/skills, /skill, /learn: conversation/skill_commands.py)."""
        ...


class Conversation(PluginConversation, Protocol):
    """One conversation on one surface, as the commands see it (what a plugin's command
    uses of it, `start_turn` with it, is PluginConversation)."""

    surface: Surface

    @property
    def services(self) -> Services:
        """The runtime's services the commands run against."""
        ...

    async def session(self, *, create: bool = False) -> Session | None:
        """The conversation's current session; a new one (bound here) when `create`."""
        ...

    async def agent(self) -> str:
        """The agent this conversation talks to now."""
        ...

    def default_agent(self) -> str:
        """The agent the surface routes this conversation to without /agent."""
        ...

    async def start_fresh(self, agent: str | None = None) -> None:
        """Start over in a fresh session (of `agent`, or the current one); `agent` ""
        goes back to the default routing."""
        ...

    async def continue_in(self, session: Session) -> None:
        """Go on in `session` (a fork): bind the conversation to it, show it."""
        ...

    async def compact(self, session_id: str) -> Reply:
        """Queue a compaction; the surface tells its outcome (now or as a turn's reply)."""
        ...

    async def send_file(self, data: bytes, name: str, caption: str) -> bool:
        """Send a file to the conversation; False where the surface cannot."""
        ...

    async def ask_aside(self, session: Session, question: str) -> Reply:
        """/btw: ask `question` beside the session's turn (conversation/steer_commands.py);
        the surface shows the answer (a chat as a reply, the terminal in its aside panel)."""
        ...

    def about(self) -> list[str]:
        """/whoami's lines about the person and the surface (before agent and session)."""
        ...

    async def state(self) -> str | None:
        """/status's line about the surface (a channel's health), or None."""
        ...


@dataclass
class Reply:
    """What a command answers; `error` marks a refusal, `quiet` an answer sent elsewhere."""

    text: str = ""
    error: bool = False


Handler = Callable[[Conversation, str], Awaitable[Reply]]


@dataclass(frozen=True)
class Command:
    """One chat command: declared once, shown in /help, completion and the palette."""

    name: str
    english: str  # the summary as declared; `summary` says it in the language in use
    run: Handler = field(repr=False, compare=False)
    args: str = ""
    aliases: tuple[str, ...] = ()
    where: frozenset[Surface] = ANY
    category: str = "Session"  # the palette's `category: action`
    action: str = ""  # the palette's action words (default: the name)

    @property
    def summary(self) -> str:
        """The one-line summary /help, completion and the palette show, in the language in
        use: the catalogs' `help.<name>`, else the words it was declared with."""
        key = f"help.{self.name}"
        return t(key) if known(key) else self.english

    def usage(self) -> str:
        """`/name ARGS` as /help shows it."""
        return f"/{self.name}" + (f" {self.args}" if self.args else "")

    @property
    def label(self) -> str:
        """The palette entry, `Session: compact`, in the language in use (the catalogs'
        `tui.palette.<category>` and `tui.palette.command.<name>`, else as declared)."""
        category, action = (
            f"tui.palette.{self.category.lower()}",
            f"tui.palette.command.{self.name}",
        )
        return (
            f"{t(category) if known(category) else self.category}: "
            f"{t(action) if known(action) else self.action or self.name}"
        )


COMMANDS: dict[str, Command] = {}
_ALIASES: dict[str, str] = {}


def command(
    name: str,
    summary: str,
    *,
    args: str = "",
    aliases: tuple[str, ...] = (),
    where: frozenset[Surface] = ANY,
    category: str = "Session",
    action: str = "",
) -> Callable[[Handler], Handler]:
    """Declare a command (the decorated coroutine runs it)."""

    def register(run: Handler) -> Handler:
        COMMANDS[name] = Command(name, summary, run, args, aliases, where, category, action)
        for alias in aliases:
            _ALIASES[alias] = name
        return run

    return register


def commands_for(surface: Surface) -> list[Command]:
    """The commands that apply on `surface`, in declaration order."""
    return [c for c in COMMANDS.values() if surface in c.where]


def find(name: str) -> Command | None:
    """The command called `name` (or an alias of it), without the slash."""
    name = name.lower()
    return COMMANDS.get(_ALIASES.get(name, name))


_COMMAND = re.compile(r"^/([A-Za-z][\w-]*)(?:@\w+)?(?:\s+(.*))?$", re.DOTALL)


def parse(text: str) -> tuple[str, str] | None:
    """`/name[@bot] args` as (name, args); None when `text` is not a command."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    return match.group(1).lower(), (match.group(2) or "").strip()


async def dispatch(text: str, conv: Conversation) -> Reply | None:
    """Run the command `text` names; None when `text` is not a command at all.

    An unknown command, or one that does not apply on this surface, is answered
    with a pointer to /help; a user error (HabakkukError) becomes an error reply.
    """
    parsed = parse(text)
    if parsed is None:
        return None
    name, rest = parsed
    found = find(name)
    if found is None:
        from . import plugin_commands  # an enabled plugin's, after every built-in

        extra = plugin_commands.plugin_command(conv.services.config, name, find)
        if extra is not None:
            said, error = await plugin_commands.run(conv, extra, rest)
            return Reply(said, error=error)
    if found is None or conv.surface not in found.where:
        return Reply(t("commands.unknown", name=name), error=True)
    try:
        return await found.run(conv, rest)
    except HabakkukError as exc:
        said = shown(exc)  # named after the command unless the service named it already
        return Reply(said if said.startswith("/") else f"/{found.name}: {said}", error=True)


def plain(text: str) -> str:
    """`text` without its Markdown emphasis (the terminal shows replies as plain notes)."""
    return re.sub(r"\*\*(.+?)\*\*|`([^`]+)`", lambda m: m.group(1) or m.group(2), text)


async def _active(conv: Conversation, session_id: str) -> list[Job]:
    return [j for j in await conv.services.sessions.active_turns(session_id) if j.kind == "turn"]


# -- the commands --------------------------------------------------------------------------


@command("new", "start a fresh session", aliases=("start",), where=INTERACTIVE,
         category="Chat", action="new session")  # fmt: skip
async def _new(conv: Conversation, rest: str) -> Reply:
    await conv.start_fresh()
    return Reply(t("commands.new.started", agent=await conv.agent()))


@command("stop", "stop the running turn", category="Turn")
async def _stop(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    turns = await _active(conv, session.id) if session else []
    for job in turns:
        await conv.services.turns.stop_turn(job.id)
    return Reply(t("commands.stop.stopped") if turns else t("commands.stop.nothing"))


@command("status", "agent, session and queue", category="Chat")
async def _status(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    lines = []
    state = await conv.state()
    if state:
        lines.append(state)
    lines.append(t("commands.status.agent", agent=await conv.agent()))
    if session is None:
        lines.append(t("commands.status.no_session"))
    else:
        title = f" — {session.title}" if session.title else ""
        turns = await _active(conv, session.id)
        lines.append(t("commands.status.session", session=session.id, title=title))
        lines.append(t("commands.status.turns", count=len(turns)))
    depth = await conv.services.turns.queue_depth()
    queue = ", ".join(f"{kind} {status}: {n}" for (kind, status), n in sorted(depth.items()))
    lines.append(t("commands.status.queue", queue=queue or t("commands.status.queue_empty")))
    return Reply("\n".join(lines))


@command("help", "this list", category="Chat", action="commands")
async def _help(conv: Conversation, rest: str) -> Reply:
    lines = [t("commands.help.title")]
    lines += [f"{c.usage()} — {c.summary}" for c in commands_for(conv.surface)]
    from .plugin_commands import help_lines

    lines += help_lines(conv.services.config, find)
    return Reply("\n".join(lines))


@command("compact", "summarize older messages so the session takes less context")
async def _compact(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    return await conv.compact(session.id)


@command("undo", "restore the workspace to before the last turn that changed it")
async def _undo(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    return Reply(await conv.services.checkpointing.undo(session.id))


@command("fork", "copy this session into a new one and continue there")
async def _fork(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    fork = await conv.services.sessions.fork_session(session.id)
    await conv.continue_in(fork)
    return Reply(t("commands.fork.done", session=session.id, fork=fork.id))


@command("rewind", "like /fork, without your last N messages (default 1)", args="[N]")
async def _rewind(conv: Conversation, rest: str) -> Reply:
    if rest and not (rest.isdigit() and int(rest) > 0):
        return Reply(t("commands.rewind.not_a_number", given=repr(rest)), error=True)
    turns = int(rest) if rest else 1
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    fork = await conv.services.sessions.rewind_session(session.id, turns)
    await conv.continue_in(fork)
    return Reply(t("commands.rewind.done", count=turns, session=session.id, fork=fork.id))


@command("title", "show or set the session title", args="[TEXT]")
async def _title(conv: Conversation, rest: str) -> Reply:
    if rest:
        session = await conv.session(create=True)
        assert session is not None
        renamed = await conv.services.sessions.rename_session(session.id, rest)
        return Reply(t("commands.title.set", title=renamed.title))
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    if session.title:
        return Reply(t("commands.title.show", title=session.title))
    return Reply(t("commands.title.none"))


@command("model", "show the model chain, or try one first", args="[PROVIDER/MODEL|default]")
async def _model(conv: Conversation, rest: str) -> Reply:
    agent = conv.services.config.agent(await conv.agent())
    chain = ", ".join(str(ref) for ref in agent.chain) or agent.model
    if not rest:
        session = await conv.session()
        chosen = await conv.services.settings.session_model(session.id) if session else None
        if chosen:
            return Reply(t("commands.model.chosen", model=chosen, agent=agent.name, chain=chain))
        return Reply(t("commands.model.chain", agent=agent.name, chain=chain))
    session = await conv.session(create=True)
    assert session is not None
    ref = await conv.services.settings.set_session_model(
        session.id, None if rest == "default" else rest
    )
    if ref is None:
        return Reply(t("commands.model.back", agent=agent.name, chain=chain))
    return Reply(t("commands.model.set", model=ref))


@command("think", "reasoning effort for this session", args="[off|low|medium|high|default]")
async def _think(conv: Conversation, rest: str) -> Reply:
    from habakkuk.engine.config import THINKING_LEVELS

    agent = conv.services.config.agent(await conv.agent())
    levels = "|".join(THINKING_LEVELS)
    level: str
    chosen: bool
    if not rest:
        session = await conv.session()
        if session is None:
            level, chosen = agent.thinking, False
        else:
            level, chosen = await conv.services.settings.session_thinking(session.id)
        if chosen:
            return Reply(
                t("commands.think.chosen", level=level, agent=agent.name, default=agent.thinking)
            )
        return Reply(t("commands.think.agent", level=level, agent=agent.name, levels=levels))
    session = await conv.session(create=True)
    assert session is not None
    level, chosen = await conv.services.settings.set_session_thinking(session.id, rest)
    if chosen:
        return Reply(t("commands.think.set", level=level))
    return Reply(t("commands.think.back", level=level, agent=agent.name))


@command("export", "the transcript as a file", args="[md|json|html|PATH]")
async def _export(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    target: str | None = None  # None: HOME/exports/<session>.<fmt>
    fmt = rest or "md"
    if rest and rest not in EXPORT_FORMATS:
        target = rest
        fmt = rest.rsplit(".", 1)[-1] if "." in rest.rsplit("/", 1)[-1] else ""
        if fmt not in EXPORT_FORMATS:
            return Reply(t("commands.export.bad_name", path=rest), error=True)
    if target is None:
        text = await conv.services.sessions.export_session(session.id, fmt)
        caption = t("commands.export.caption", title=session.title or session.id)
        if await conv.send_file(text.encode("utf-8"), f"{session.id}.{fmt}", caption):
            return Reply()
    path = await conv.services.sessions.save_export(session.id, fmt, target)
    return Reply(t("commands.export.wrote", path=path))


@command("retry", "run your last message again", where=INTERACTIVE, category="Turn")
async def _retry(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    last = last_typed(await conv.services.sessions.messages(session.id)) if session else None
    if last is None:
        return Reply(t("commands.retry.nothing"))
    await conv.start_turn(last)
    return Reply()


@command("queue", "queue a message as a turn", args="TEXT", where=INTERACTIVE, category="Turn")
async def _queue(conv: Conversation, rest: str) -> Reply:
    if not rest:
        return Reply(t("commands.queue.usage"), error=True)
    await conv.start_turn(rest)
    return Reply()


@command("usage", "this session's tokens and cost")
async def _usage(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    if session is None:
        return Reply(t("common.no_messages"))
    totals = await conv.services.ledger.usage_totals(session=session.id)
    if not totals:
        return Reply(t("commands.usage.none", session=session.id))
    lines = [t("commands.usage.title", session=session.id)]
    for total in totals:
        priced = total.calls > total.unpriced_calls
        cost = f"${total.cost:.4f}" if priced else t("commands.usage.cost_unknown")
        lines.append(
            t(
                "commands.usage.line",
                model=total.model,
                calls=total.calls,
                input=total.input_tokens + total.cache_read_tokens,
                cached=total.cache_read_tokens,
                output=total.output_tokens,
                web=_web_uses(total),
                cost=cost,
            )
        )
    if len(totals) > 1:
        ins = sum(u.input_tokens + u.cache_read_tokens for u in totals)
        outs = sum(u.output_tokens for u in totals)
        priced = any(u.calls > u.unpriced_calls for u in totals)
        cost = f"${sum(u.cost for u in totals):.4f}" if priced else t("commands.usage.cost_unknown")
        lines.append(t("commands.usage.total", input=ins, output=outs, cost=cost))
    unpriced = sum(u.unpriced_calls for u in totals)
    if unpriced:
        # Counted, so a total without them is not read as the whole bill.
        lines.append(t("prices.unpriced_calls", count=unpriced))
    return Reply("\n".join(lines))


def _web_uses(total: UsageTotal) -> str:
    """The hosted web searches and fetches of a usage line (", 3 web searches")."""
    parts = []
    if total.web_searches:
        parts.append(t("commands.usage.web_searches", count=total.web_searches))
    if total.web_fetches:
        parts.append(t("commands.usage.web_fetches", count=total.web_fetches))
    return "".join(f", {p}" for p in parts)


@command("whoami", "who you are here and how you got in", where=INTERACTIVE, category="Chat")
async def _whoami(conv: Conversation, rest: str) -> Reply:
    session = await conv.session()
    lines = [*conv.about(), t("commands.status.agent", agent=await conv.agent())]
    if session is None:
        lines.append(t("commands.status.no_session"))
    else:
        lines.append(t("commands.status.session", session=session.id, title=""))
    return Reply("\n".join(lines))


@command("agents", "list the agents", category="Agent", action="list")
async def _agents(conv: Conversation, rest: str) -> Reply:
    current = await conv.agent()
    lines = [
        f"{'▸' if name == current else '•'} **{name}** ({agent.mode}, {agent.model})"
        for name, agent in sorted(conv.services.config.agents.items())
    ]
    return Reply("\n".join(lines))


@command("agent", "switch this conversation to another agent", args="NAME|default",
         where=INTERACTIVE, category="Agent", action="switch")  # fmt: skip
async def _agent(conv: Conversation, rest: str) -> Reply:
    name = rest.split()[0] if rest else ""
    if not name:
        return await _agents(conv, rest)
    agents = conv.services.config.agents
    if name != "default" and name not in agents:
        known_agents = ", ".join(sorted(agents))
        return Reply(t("commands.agent.unknown", name=name, agents=known_agents), error=True)
    await conv.start_fresh("" if name == "default" else name)
    agent = await conv.agent()
    if name == "default":
        return Reply(t("commands.agent.default", agent=agent))
    return Reply(t("commands.agent.switched", agent=agent))


@command("remember", "save these words as a new note", args="TEXT", category="Memory")
async def _remember(conv: Conversation, rest: str) -> Reply:
    from habakkuk.engine.control_chars import without_controls
    from habakkuk.knowledge.memory_types import Provenance
    from habakkuk.knowledge.memory_views import title_from_text

    # The user's own words: a stray control character (a NUL, a bidirectional override
    # pasted along) is taken out, not a reason to refuse what they asked to remember.
    rest = without_controls(rest).strip()
    if not rest:
        return Reply(t("commands.remember.usage"), error=True)
    agent = await conv.agent()
    session = await conv.session()
    provenance = Provenance(by="user", session=session.id if session else "", tool="/remember")
    saved = await conv.services.memory.save(
        agent,
        title_from_text(rest),
        rest,
        tags=["remembered"],
        provenance=provenance,
        replace=False,  # /remember never overwrites a note that has the same title
    )
    return Reply(t("commands.remember.saved", title=saved.note.title, slug=saved.note.slug))


@command("forget", "forget a note: its slug, its title or words from it", args="QUERY",
         category="Memory")  # fmt: skip
async def _forget(conv: Conversation, rest: str) -> Reply:
    from habakkuk.knowledge.memory_types import NoteSummary, Provenance
    from habakkuk.knowledge.memory_views import note_to_forget

    if not rest:
        return Reply(t("commands.forget.usage"), error=True)
    agent = await conv.agent()
    memory = conv.services.memory
    found = await note_to_forget(memory, agent, rest)
    if isinstance(found, NoteSummary):
        session = await conv.session()
        provenance = Provenance(by="user", session=session.id if session else "", tool="/forget")
        gone = await memory.forget(agent, found.slug, provenance=provenance)
        return Reply(t("commands.forget.done", title=gone.title, slug=gone.slug))
    if not found:
        return Reply(t("commands.forget.none", query=repr(rest)), error=True)
    example = found[0].note.slug
    lines = [t("commands.forget.several", count=len(found), query=repr(rest), example=example)]
    for n, hit in enumerate(found, 1):
        mark = t("commands.forget.untrusted") if hit.note.untrusted else ""
        lines.append(f"{n}. **{hit.note.title}**{mark} — `{hit.note.slug}`")
    return Reply("\n".join(lines))


def _typed(stored: StoredMessage) -> str | None:
    """The text of a message the user typed (None for tool results and Habakkuk's notes)."""
    from habakkuk.engine.llm.types import TextBlock

    message = stored.message
    if message.role != "user" or message.tool_results:
        return None
    first = next((b for b in message.blocks if isinstance(b, TextBlock) and b.text), None)
    if first is None or first.text.startswith("[current time:"):
        return None
    return first.text


def last_typed(messages: list[StoredMessage]) -> str | None:
    """The last text the user typed (tool results and Habakkuk's own notes skipped)."""
    for stored in reversed(messages):
        text = _typed(stored)
        if text is not None:
            return text
    return None


def typed_seqs(messages: list[StoredMessage]) -> list[int]:
    """The seqs of the messages the user typed, oldest first (where /rewind cuts)."""
    return [stored.seq for stored in messages if _typed(stored) is not None]


def summaries(surface: Surface) -> dict[str, str]:
    """`/name` -> summary of the commands on `surface` (for completion hints)."""
    return {
        f"/{c.name}": c.summary + (f": {c.usage()}" if c.args else "")
        for c in commands_for(surface)
    }


__all__ = [
    "ANY",
    "COMMANDS",
    "INTERACTIVE",
    "Command",
    "Conversation",
    "Reply",
    "Services",
    "Surface",
    "commands_for",
    "dispatch",
    "find",
    "last_typed",
    "parse",
    "plain",
    "summaries",
]
