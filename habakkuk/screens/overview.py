"""The overview, the control room: queue, HTTP listener, usage today, recent errors,
channels, MCP servers, the home's nodes, jobs running here and what is scheduled.

It reads `Runtime.control.overview()`, the read /api/overview serves, so the terminal and
the dashboard agree. Errors are cut to fit a row; Enter on one shows it whole.
Other processes publish nothing on this bus, so besides job events the screen
reads again every few seconds while it is shown (r reloads at once).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from habakkuk.engine.agent.requests import session_of
from habakkuk.engine.i18n import t
from habakkuk.screens.audit_block import audit_text
from habakkuk.screens.base import PollingScreen, on_bus
from habakkuk.screens.bus_messages import (
    BusEvent,
    ConfigReloadedArrived,
    GoalChangedArrived,
    JobFinishedArrived,
    TurnEndedArrived,
    TurnStartedArrived,
)
from habakkuk.screens.text_prompt import ShowText
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.engine.nodes import Node
    from habakkuk.engine.overview import HttpListener, Overview

# Channel states that are not an error (a silent or not running one is).
CHANNEL_OK = {"connected", "standby", "starting", "never started", "stopped"}


def due_in(seconds: float) -> str:
    """How long until a job is due, in the largest unit that reads well ("in 4m")."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"in {seconds:.0f}s"
    if seconds < 90 * 60:
        return f"in {seconds / 60:.0f}m"
    if seconds < 36 * 3600:
        return f"in {seconds / 3600:.1f}h"
    return f"in {seconds / 86400:.1f}d"


def one_line(text: str) -> str:
    return " ".join(text.split())


def cut(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters (… marks a cut)."""
    flat = one_line(text)
    return flat if len(flat) <= width else flat[: max(1, width - 1)] + "…"


def http_line(http: HttpListener) -> str:
    """The HTTP listener in one line."""
    if http.state == "off":
        return "off (no http: section in the config)"
    if http.state == "serving":
        return f"serving {http.address} · {http.holder}"
    held = f"held by {http.holder}" if http.holder else "no process of this home serves it"
    if http.state == "stand-by":
        return f"stand-by: {http.address} is in use, {held}; taken over when free"
    return f"{http.address}: {held}"


def ago(seconds: float) -> str:
    """How long ago, in the largest unit that reads well ("4s ago")."""
    return due_in(seconds).replace("in ", "", 1) + " ago"


def since(at: float | None, now: float, *, never: str = "never") -> str:
    """How long ago the time `at` was ("4s ago"), `never` for None."""
    return never if at is None else ago(now - at)


def node_row(node: Node, now: float) -> tuple[str, str, str, str, str]:
    """One node as the nodes table shows it: host, pid, agents, leases, heartbeat."""
    agents = "all" if "*" in node.agents else ", ".join(node.agents)
    beat = ago(now - node.beat)
    if node.stale:
        beat = f"stale: {beat}"
    elif abs(node.skew) >= 1:
        beat += f" (clock {node.skew:+.1f}s)"
    pid = f"{node.pid} (here)" if node.here else str(node.pid)
    return node.host, pid, agents, ", ".join(node.leases) or "-", beat


def usage_line(view: Overview) -> str:
    """Today's calls, tokens and cost in one line."""
    totals = view.usage_today
    if not totals:
        return "no model calls today"
    calls = sum(t.calls for t in totals)
    tokens_in = sum(t.input_tokens + t.cache_read_tokens + t.cache_write_tokens for t in totals)
    tokens_out = sum(t.output_tokens for t in totals)
    cost = sum(t.cost for t in totals)
    unpriced = sum(t.unpriced_calls for t in totals)
    line = f"today {calls} call(s) · {tokens_in:,} in · {tokens_out:,} out · ${cost:.4f}"
    return line + (f" ({unpriced} unpriced)" if unpriced else "")


def budget_line(view: Overview) -> str:
    """Today's spend and each limit in force, and what pauses turns now ("" when no
    limit is set)."""
    status = view.budget
    if status is None or not status.limited:
        return ""
    parts = [t("budget.overview.spent", spent=f"${status.install.today.spent:,.2f}")]
    for scope in (status.install, *status.agents):
        who = t("budget.install") if not scope.name else t("budget.agent", agent=scope.name)
        limits = [
            t(f"budget.overview.{kind}", limit=f"${spend.limit:,.2f}", percent=f"{spend.percent:g}")
            for kind, spend in (("daily", scope.today), ("monthly", scope.month))
            if spend.limit > 0
        ]
        if scope.per_turn > 0:
            limits.append(t("budget.overview.per_turn", limit=f"${scope.per_turn:,.2f}"))
        if limits:
            parts.append(f"{who}: " + ", ".join(limits))
    lines = [" · ".join(parts)]
    paused = status.install.paused or next((a.paused for a in status.agents if a.paused), "")
    return "\n".join([*lines, paused] if paused else lines)


def config_line(view: Overview) -> str:
    """config.yaml's edits not applied here ("" when none): its error while invalid,
    the sections a restart applies."""
    from habakkuk.screens.reload_notice import sections_text

    lines = []
    if view.config.invalid:
        lines.append(t("reload.invalid", problem=view.config.invalid))
    if view.config.restart:
        lines.append(t("reload.overview_restart", sections=sections_text(view.config.restart)))
    return "\n".join(lines)


def headers(*names: str) -> list[str]:
    """The overview tables' column headers in the language in use (`tui.column.<name>`);
    the tables find their columns by position, never by header."""
    return [t(f"tui.column.{name}") for name in names]


class OverviewScreen(PollingScreen):
    """What the home is doing; refreshed as jobs start and finish, and every few seconds."""

    DEFAULT_CSS = """
    OverviewScreen .status-row { height: auto; }
    OverviewScreen .status-label { width: 7; text-style: bold; }
    OverviewScreen .status-row > #queue-summary, OverviewScreen .status-row > #http-summary,
    OverviewScreen .status-row > #usage-summary, OverviewScreen .status-row > #config-summary {
        width: 1fr;
    }
    """
    BINDINGS = [Binding("r", "reload", "Refresh", id="overview.refresh")]

    refresh_seconds = 5.0

    def __init__(self) -> None:
        super().__init__(id="overview")
        self._queue = Static("", id="queue-summary")
        self._http = Static("", id="http-summary")
        self._usage = Static("", id="usage-summary")
        self._config = Static("", id="config-summary")
        self._audit = Static("", id="audit-summary")
        # Shown while config.yaml has edits this process has not applied.
        self._config_row = Horizontal(classes="status-row", id="config-row")
        self._config_row.display = False
        self._errors: DataTable[str | Text] = DataTable(id="errors", cursor_type="row")
        self._channels_title = Static(t("tui.overview.channels"), classes="section-title")
        self._channels: DataTable[str | Text] = DataTable(id="channels", cursor_type="none")
        self._mcp_title = Static(t("tui.overview.mcp"), classes="section-title")
        self._mcp: DataTable[str | Text] = DataTable(id="mcp", cursor_type="none")
        self._nodes_title = Static(t("tui.overview.nodes"), classes="section-title")
        self._nodes_table: DataTable[str | Text] = DataTable(id="nodes", cursor_type="none")
        self._nodes_title.display = self._nodes_table.display = False  # until another shows
        self._running_table: DataTable[str | Text] = DataTable(id="running", cursor_type="none")
        self._scheduled: DataTable[str | Text] = DataTable(id="scheduled", cursor_type="none")
        # (title, whole text) of each row of the errors table, for Enter.
        self.error_rows: list[tuple[str, str]] = []
        self.queued = 0
        self.running_count = 0

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            for label, value in (
                (t("tui.overview.queue"), self._queue),
                (t("tui.overview.http"), self._http),
                (t("tui.overview.usage"), self._usage),
            ):
                with Horizontal(classes="status-row"):
                    yield Static(label, classes="status-label")
                    yield value
            with self._config_row:
                yield Static(t("reload.overview_label"), classes="status-label")
                yield self._config
            yield Static(t("tui.overview.errors"), classes="section-title")
            yield self._errors
            yield Static(t("audit.overview_title"), classes="section-title")
            yield self._audit
            yield self._channels_title
            yield self._channels
            yield self._mcp_title
            yield self._mcp
            yield self._nodes_title
            yield self._nodes_table
            yield Static(t("tui.overview.running"), classes="section-title")
            yield self._running_table
            yield Static(t("tui.overview.scheduled"), classes="section-title")
            yield self._scheduled
        yield KeyFooter()

    def on_mount(self) -> None:
        self._errors.add_columns(*headers("kind", "id", "error"))
        self._channels.add_columns(
            *headers("account", "type", "state", "since", "in", "out", "detail")
        )
        self._mcp.add_columns(*headers("server", "state", "detail"))
        self._nodes_table.add_columns(*headers("host", "pid", "agents", "leases", "heartbeat"))
        self._running_table.add_columns(*headers("kind", "job", "session", "attempt"))
        self._scheduled.add_columns(*headers("due", "kind", "job", "why"))
        # Only the errors take the cursor: the other tables are read, not picked from.
        for table in (
            self._channels,
            self._mcp,
            self._nodes_table,
            self._running_table,
            self._scheduled,
        ):
            table.can_focus = False
        for table in (
            self._errors,
            self._channels,
            self._mcp,
            self._nodes_table,
            self._running_table,
            self._scheduled,
        ):
            table.styles.height = "auto"
        self._errors.focus()

    def refresh_data(self) -> None:
        self.action_reload()

    @on_bus(
        TurnStartedArrived,
        TurnEndedArrived,
        JobFinishedArrived,
        ConfigReloadedArrived,
        GoalChangedArrived,
    )
    def _work_changed(self, message: BusEvent[Any]) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        """Read the overview again."""
        self._reload()

    @work(exclusive=True, group="reload")
    async def _reload(self) -> None:
        view = await self.read(lambda runtime: runtime.control.overview())
        if view is not None:
            self.show(view)

    def show(self, view: Overview) -> None:
        """Fill every section from one overview read."""
        depth = view.queue
        self.queued = sum(n for (_, status), n in depth.items() if status == "queued")
        self.running_count = sum(n for (_, status), n in depth.items() if status == "running")
        waiting = f" · {view.approvals} approval(s) waiting" if view.approvals else ""
        if view.open_cards:
            waiting += f" · {view.open_cards} open card(s) on the board"
        if view.unsent:  # each was told in its chat; the errors below say what and why
            waiting += f" · {view.unsent} part(s) a chat could not receive (7 days)"
        lines = [f"{self.queued} queued · {self.running_count} running (every process){waiting}"]
        for (kind, status), count in sorted(depth.items()):
            lines.append(f"  {kind:<12} {status:<8} {count}")
        if view.goals:  # the sessions' running /goals
            lines.append(t("goal.overview.title"))
            lines += [
                "  " + t("goal.overview.line", session=goal.session, counted=goal.counted,
                         budget=goal.budget, text=one_line(goal.text))
                for goal in view.goals
            ]  # fmt: skip
        self._queue.update(Text("\n".join(lines)))
        self._http.update(Text(http_line(view.http)))
        spend = budget_line(view)
        self._usage.update(Text(usage_line(view) + (f"\n{spend}" if spend else "")))
        self._audit.update(Text(audit_text(view.findings)))
        config = config_line(view)
        self._config.update(Text(config))
        self._config_row.display = bool(config)
        self._show_errors(view)
        self._show_channels(view)
        self._show_mcp(view)
        self._show_nodes(view)
        self._show_jobs(view)

    def _show_errors(self, view: Overview) -> None:
        rows: list[tuple[str, str, str, str]] = []  # kind, id, title, whole text
        for job in view.errors:
            rows.append((job.kind, job.id, f"{job.kind} {job.id} failed", job.error or ""))
        for health in view.channels:
            why = health.detail or health.last_error
            if health.state not in CHANNEL_OK and why:
                account = health.account
                rows.append(("channel", account, f"channel {account}: {health.state}", why))
        for server in view.mcp:
            if server.state == "down" and server.detail:
                rows.append(("mcp", server.name, f"MCP server {server.name}: down", server.detail))
        table = self._errors
        cursor = table.cursor_row
        table.clear()
        self.error_rows = [(title, text) for _, _, title, text in rows]
        # The error column gets what the kind and id columns leave of the row.
        width = max(20, self.size.width - 36)
        for kind, ident, _, text in rows:
            table.add_row(Text(kind), Text(cut(ident, 22)), Text(cut(text, width)))
        if rows:
            table.move_cursor(row=min(max(cursor, 0), len(rows) - 1))
        else:
            table.add_row("", Text("no errors"), "")

    def _show_channels(self, view: Overview) -> None:
        # Channels appear only when the config has some (no empty section otherwise).
        shown = bool(view.channels)
        self._channels_title.display = self._channels.display = shown
        self._channels.clear()
        now = time.time()
        for health in view.channels:
            # The last error, with its age, says more than a state's detail once it works.
            detail = one_line(health.detail)
            if health.last_error and (health.healthy or not detail):
                when = since(health.last_error_at, now)
                detail = f"error {when}: {one_line(health.last_error)}"
            if health.restarts:
                detail = f"{health.restarts} restart(s) {detail}".strip()
            self._channels.add_row(
                Text(health.account),
                Text(health.type),
                Text(health.state),
                Text(since(health.since, now, never="")),
                Text(since(health.last_in, now)),
                Text(since(health.last_out, now)),
                Text(cut(detail, 50)),
            )

    def _show_mcp(self, view: Overview) -> None:
        shown = bool(view.mcp)
        self._mcp_title.display = self._mcp.display = shown
        self._mcp.clear()
        for server in view.mcp:
            self._mcp.add_row(Text(server.name), Text(server.state), Text(cut(server.detail, 60)))

    def _show_nodes(self, view: Overview) -> None:
        # Shown once another process serves the home too (another --serve, here or on
        # another machine): alone, this process is all there is to say.
        shown = any(not node.here for node in view.nodes)
        self._nodes_title.display = self._nodes_table.display = shown
        self._nodes_table.clear()
        now = time.time()
        for node in view.nodes:
            self._nodes_table.add_row(*(Text(cut(value, 60)) for value in node_row(node, now)))

    def _show_jobs(self, view: Overview) -> None:
        self._running_table.clear()
        for job in view.running:
            self._running_table.add_row(
                Text(job.kind),
                Text(job.id),
                Text(session_of(job)),
                str(job.attempts),
            )
        if not view.running:
            self._running_table.add_row("", Text("nothing running in this process"), "", "")
        self._scheduled.clear()
        now = time.time()
        for job in view.upcoming:
            if job.attempts:
                why = f"retry {job.attempts + 1} of {job.max_attempts}: {one_line(job.error or '')}"
            else:
                why = "timed"
            self._scheduled.add_row(
                Text(due_in(job.run_after - now)), Text(job.kind), Text(job.id), Text(why[:120])
            )
        if not view.upcoming:
            self._scheduled.add_row("", "", Text("nothing scheduled"), "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on an error: show its whole text."""
        if event.data_table is self._errors and 0 <= event.cursor_row < len(self.error_rows):
            title, text = self.error_rows[event.cursor_row]
            self.app.push_screen(ShowText(title, text))
