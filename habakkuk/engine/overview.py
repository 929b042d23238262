"""What the overview shows (the terminal's overview screen and GET /api/overview): one
read of the home's queue, jobs, errors, channels, MCP servers, usage, HTTP listener,
schedule counts and nodes (every process serving the home), built by
`Runtime.control.overview`."""

from __future__ import annotations

from dataclasses import dataclass, field

from habakkuk.engine.audit_findings import Finding
from habakkuk.engine.budget_access import BudgetStatus
from habakkuk.engine.goals import Goal
from habakkuk.engine.jobs import Job
from habakkuk.engine.llm.usage import UsageTotal
from habakkuk.engine.nodes import Node

# The overview lists jobs that failed in this many days (newest OVERVIEW_ERRORS of them).
OVERVIEW_ERROR_DAYS = 7
OVERVIEW_ERRORS = 20


@dataclass
class HttpListener:
    """The home's HTTP listener as the overview shows it."""

    state: str  # serving (here) | stand-by (here, the address is taken) | elsewhere | off
    address: str  # the URL served, or the configured listen address
    holder: str  # which process holds it ("pid 4242 on host"), "" when unknown


# A configured channel account no process of the home (or, for /healthz, this process)
# has run.
NEVER_STARTED = "never started"


@dataclass(frozen=True)
class ChannelState:
    """One configured channel account's state, as /healthz and /readyz report it."""

    account: str
    type: str
    state: str  # never started | standby | starting | connected | silent | backoff | fatal
    # | stopped (and, read from the record, not running: channels/health.py)


# The states of a channel account that mean it works: it receives (connected), or
# another process of the home runs it (standby).
CHANNEL_HEALTHY = frozenset({"connected", "standby"})


@dataclass(frozen=True)
class ChannelHealth:
    """One configured channel account's health, as every surface shows it (`habakkuk
    channels` and its --json, the overview, /api/overview, /status): built once from its
    recorded row and lease by channels.health.channel_health. Times are epoch seconds."""

    account: str
    type: str
    # never started | not running (no live process holds it) | silent (connected, but
    # no message or keepalive within its silent_limit) | standby | starting | connected
    # | backoff | fatal | stopped
    state: str
    since: float | None  # when it entered this state
    last_beat: float | None  # the platform's last message or keepalive
    last_in: float | None  # the last message it brought in
    last_out: float | None  # the last message sent out through it
    last_error: str  # "" when it never failed; else kept until a newer error replaces it
    last_error_at: float | None
    restarts: int
    holder: str  # the process holding it ("host:pid:..."), "" when none
    detail: str  # what the recorded state says more (why it stopped, when it restarts)

    @property
    def healthy(self) -> bool:
        """It receives, here or in another process of the home."""
        return self.state in CHANNEL_HEALTHY


@dataclass
class McpState:
    """One configured MCP server's link in this process."""

    name: str
    state: str  # connecting | up | down | closed | not started
    detail: str  # its last error, or how many tools it gave


@dataclass(frozen=True)
class ConfigState:
    """config.yaml as this process last read it (services/hot_reload.py)."""

    # Sections that differ from the config this process runs on: applied at the next start.
    restart: tuple[str, ...] = ()
    # The loader's one-line error ("path:line: ...") while the file is invalid, else "".
    invalid: str = ""


@dataclass
class Overview:
    """What the overview screen and /api/overview show, read once."""

    queue: dict[tuple[str, str], int]  # (kind, status) -> jobs, every process of the home
    running: list[Job]  # run by this process's pools
    upcoming: list[Job]  # timed jobs and retries, soonest first
    errors: list[Job]  # failed for good in the last OVERVIEW_ERROR_DAYS, newest first
    channels: list[ChannelHealth]  # as channel_states()
    mcp: list[McpState]
    usage_today: list[UsageTotal]  # since midnight in the config timezone
    approvals: int  # waiting in any process of the home
    http: HttpListener
    schedules: tuple[int, int] = (0, 0)  # (total, enabled) in control.db
    open_cards: int = 0  # board cards todo, doing or blocked in control.db
    # Parts a chat could not receive in the last OVERVIEW_ERROR_DAYS (a file to a chat
    # without files, ...): each was told in its chat, and is among `errors`.
    unsent: int = 0
    # Every process serving the home (engine/nodes.py), whichever node reads it.
    nodes: list[Node] = field(default_factory=list)
    # config.yaml's edits this process has not applied (a restart applies them).
    config: ConfigState = field(default_factory=ConfigState)
    # The sessions' running /goals (state.db), oldest first.
    goals: list[Goal] = field(default_factory=list)
    # Spend today and this month against the spending limits (None: not read here).
    budget: BudgetStatus | None = None
    # The security audit's findings (services/audit.py), worst first.
    findings: list[Finding] = field(default_factory=list)
