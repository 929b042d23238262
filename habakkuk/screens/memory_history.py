"""Over the Memory screen: one note's history (who, when, what; the diff; restore) and
the review's open proposals (apply or dismiss)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.screens.memory_access import USER, MemoryScreenAccess
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.knowledge.memory_types import Change, Proposal, RestoreVersion

HISTORY_LIMIT = 200

DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_text(diff: str) -> Text:
    """A unified diff, coloured line by line."""
    text = Text()
    for line in diff.splitlines():
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        text.append(line + "\n", style=style)
    return text


SHARED_CSS = """
    .memory-overlay DataTable { height: 2fr; }
    .memory-overlay VerticalScroll { height: 3fr; border-top: solid $panel; padding: 0 1; }
    .memory-overlay .empty { height: auto; }
"""


class HistoryScreen(Screen[bool]):
    """The changes of one note (or USER.md), newest first; `b` puts back the content before
    the highlighted change (undo), `a` the content after it (redo). Esc closes; the result
    says whether anything was restored."""

    DEFAULT_CSS = SHARED_CSS
    BINDINGS = [
        Binding("b", "restore('before')", "Restore before", id="memory.restore_before"),
        Binding("a", "restore('after')", "Restore after", id="memory.restore_after"),
        Binding("escape,q", "close", "Close", id="memory.history_close"),
    ]

    def __init__(self, memory: MemoryScreenAccess, agent: str, name: str, label: str) -> None:
        super().__init__(id="memory-history", classes="memory-overlay")
        self.memory = memory
        self.agent = agent
        self.name_ = name
        self.changes: list[Change] = []
        self._loads = 0
        self.restored = False
        self._title = Static(Content(f"History of {label} ({name})"), classes="section-title")
        self._table: DataTable[str | Text] = DataTable(
            id="change-table", cursor_type="row", zebra_stripes=True
        )
        self._diff = Static("", id="change-diff")
        self._empty = Static("No recorded changes.", classes="empty")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._table
        yield self._empty
        with VerticalScroll():
            yield self._diff
        yield KeyFooter()

    def on_mount(self) -> None:
        self._table.add_columns("when", "who", "op", "tainted", "change", "note")
        self._empty.display = False
        self._table.focus()
        self.load()

    @work(group="history")
    async def load(self) -> None:
        """Read the changes again and list them (a later read wins; none is cancelled)."""
        self._loads += 1
        load = self._loads
        try:
            changes = await self.memory.history(self.agent, name=self.name_, limit=HISTORY_LIMIT)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        if load != self._loads:
            return
        self.changes = changes
        table = self._table
        row = table.cursor_row
        table.clear()
        for change in changes:
            table.add_row(
                change.at[:19].replace("T", " "),
                Text(change.by + (f" ({change.tool})" if change.tool else "")),
                change.op,
                Text("tainted", style="yellow") if change.tainted else "",
                change.id[:8],
                Text(change.note or (f"restores {change.restores[:8]}" if change.restores else "")),
            )
        self._empty.display = not changes
        if changes:
            table.move_cursor(row=min(max(row, 0), len(changes) - 1))
        else:
            self._diff.update("")
        self.refresh_bindings()

    def selected(self) -> Change | None:
        row = self._table.cursor_row
        return self.changes[row] if 0 <= row < len(self.changes) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        change = self.selected()
        if change is not None:
            self._show(change.id)

    @work(group="history-diff")
    async def _show(self, change_id: str) -> None:
        try:
            detail = await self.memory.change(self.agent, change_id)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        selected = self.selected()
        if selected is not None and selected.id == detail.change.id:
            self._diff.update(diff_text(detail.diff) if detail.diff else "(no difference)")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "restore":
            change = self.selected()
            if change is None:
                return False
            # Nothing to put back before a creation, or after a deletion.
            version = parameters[0] if parameters else "before"
            return not (version == "before" and change.op == "created") and not (
                version == "after" and change.op == "deleted"
            )
        return True

    def action_restore(self, version: RestoreVersion) -> None:
        """Put back the content before (or after) the highlighted change, as a new change."""
        change = self.selected()
        if change is not None:
            self._restore(change.id, version)

    @work(group="history-restore")
    async def _restore(self, change_id: str, version: RestoreVersion) -> None:
        try:
            result = await self.memory.restore(
                self.agent, change_id, version=version, provenance=USER
            )
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        if result.unchanged:
            self.notify("Already that way: nothing restored.", markup=False)
            return
        self.restored = True
        self.notify(f"Restored the version {version} change {change_id[:8]}.", markup=False)
        self._table.move_cursor(row=0)
        self.load()

    def action_close(self) -> None:
        self.dismiss(self.restored)


class ProposalsScreen(Screen[bool]):
    """The changes the review may not make alone (deleting a note, emptying USER.md,
    shrinking a note by more than half): `y` applies the highlighted one as the user,
    `n` dismisses it. Esc closes; the result says whether any was applied."""

    DEFAULT_CSS = SHARED_CSS
    BINDINGS = [
        Binding("y", "resolve(True)", "Apply", id="memory.proposal_apply"),
        Binding("n", "resolve(False)", "Dismiss", id="memory.proposal_dismiss"),
        Binding("escape,q", "close", "Close", id="memory.proposals_close"),
    ]

    def __init__(self, memory: MemoryScreenAccess, agent: str) -> None:
        super().__init__(id="memory-proposals", classes="memory-overlay")
        self.memory = memory
        self.agent = agent
        self.rows: list[Proposal] = []
        self._loads = 0
        self.applied = False
        self._title = Static(Content(f"Proposals of {agent}'s review"), classes="section-title")
        self._table: DataTable[str | Text] = DataTable(
            id="proposal-table", cursor_type="row", zebra_stripes=True
        )
        self._detail = Static("", id="proposal-detail")
        self._empty = Static("No open proposals.", classes="empty")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._table
        yield self._empty
        with VerticalScroll():
            yield self._detail
        yield KeyFooter()

    def on_mount(self) -> None:
        self._table.add_columns("action", "name", "title", "reason", "by", "when")
        self._empty.display = False
        self._table.focus()
        self.load()

    @work(group="proposals")
    async def load(self) -> None:
        """Read the open proposals again and list them (a later read wins)."""
        self._loads += 1
        load = self._loads
        try:
            rows = await self.memory.proposals(self.agent)
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        if load != self._loads:
            return
        self.rows = rows
        table = self._table
        row = table.cursor_row
        table.clear()
        for proposal in rows:
            table.add_row(
                proposal.action,
                Text(proposal.name),
                Text(proposal.title),
                Text(" ".join(proposal.reason.split())),
                proposal.by,
                proposal.at[:16].replace("T", " "),
            )
        self._empty.display = not rows
        if rows:
            table.move_cursor(row=min(max(row, 0), len(rows) - 1))
        self._show_detail()
        self.refresh_bindings()

    def selected(self) -> Proposal | None:
        row = self._table.cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        proposal = self.selected()
        if proposal is None:
            self._detail.update("")
            return
        if proposal.action == "forget":
            what = f"Forget {proposal.name} (it moves to memory/.trash/)."
        else:
            what = proposal.content or "(empty)"
        self._detail.update(Content.assemble((proposal.reason, "italic"), "\n\n", Content(what)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "resolve":
            return bool(self.rows)
        return True

    def action_resolve(self, apply: bool) -> None:
        """Apply or dismiss the highlighted proposal."""
        proposal = self.selected()
        if proposal is not None:
            self._resolve(proposal.id, apply)

    @work(group="proposals-resolve")
    async def _resolve(self, proposal_id: str, apply: bool) -> None:
        try:
            await self.memory.resolve_proposal(
                self.agent, proposal_id, apply=apply, provenance=USER
            )
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.applied = self.applied or apply
        self.notify("Applied." if apply else "Dismissed.", markup=False)
        self.load()

    def action_close(self) -> None:
        self.dismiss(self.applied)
