"""Over the Memory screen: one note's history (who, when, what; the diff; restore) and
the review's open proposals (apply or dismiss)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.i18n import t
from habakkuk.knowledge.memory_types import MemoryAccess
from habakkuk.screens.memory_access import USER
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.knowledge.memory_types import Change, Proposal, RestoreVersion

R = TypeVar("R")  # a row of an overlay's list
T = TypeVar("T")

HISTORY_LIMIT = 200

DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_text(diff: str) -> Text:
    """A unified diff, coloured line by line."""
    text = Text()
    for line in diff.splitlines():
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        text.append(line + "\n", style=style)
    return text


class MemoryOverlay(Screen[bool], Generic[R]):
    """A list over the Memory screen (a table of `R`, what it says when empty, the
    highlighted row's detail below), read through the memory; a refusal of the memory is
    a notice. Esc closes; the result says whether anything changed."""

    DEFAULT_CSS = """
    .memory-overlay DataTable { height: 2fr; }
    .memory-overlay VerticalScroll { height: 3fr; border-top: solid $panel; padding: 0 1; }
    .memory-overlay .empty { height: auto; }
    """
    COLUMNS: tuple[str, ...] = ()
    ITEM = ""  # a row's word: the ids `ITEM-table` and `ITEM-DETAIL`
    DETAIL = "detail"

    def __init__(
        self, memory: MemoryAccess, agent: str, *, id: str, title: str, empty: str
    ) -> None:
        super().__init__(id=id, classes="memory-overlay")
        self.memory = memory
        self.agent = agent
        self.rows: list[R] = []
        self.changed = False
        self._loads = 0
        self._title = Static(Content(title), classes="section-title")
        self._table: DataTable[str | Text] = DataTable(
            id=f"{self.ITEM}-table", cursor_type="row", zebra_stripes=True
        )
        self._detail = Static("", id=f"{self.ITEM}-{self.DETAIL}")
        self._empty = Static(empty, classes="empty")

    async def fetch(self) -> list[R]:
        """Read the rows."""
        raise NotImplementedError

    def cells(self, row: R) -> list[str | Text]:
        """A row's cells, one per column."""
        raise NotImplementedError

    def loaded(self) -> None:
        """The rows were read and listed."""

    async def attempt(self, what: Callable[[], Awaitable[T]]) -> T | None:
        """Run one memory call; a refusal is a notice and None."""
        try:
            return await what()
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._table
        yield self._empty
        with VerticalScroll():
            yield self._detail
        yield KeyFooter()

    def on_mount(self) -> None:
        self._table.add_columns(*self.COLUMNS)
        self._empty.display = False
        self._table.focus()
        self.load()

    @work(group="overlay")
    async def load(self) -> None:
        """Read the rows again and list them (a later read wins; none is cancelled)."""
        self._loads += 1
        load = self._loads
        rows = await self.attempt(self.fetch)
        if rows is None or load != self._loads:
            return
        self.rows = rows
        table = self._table
        row = table.cursor_row
        table.clear()
        for entry in rows:
            table.add_row(*self.cells(entry))
        self._empty.display = not rows
        if rows:
            table.move_cursor(row=min(max(row, 0), len(rows) - 1))
        self.loaded()
        self.refresh_bindings()

    def selected(self) -> R | None:
        """The highlighted row."""
        row = self._table.cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def action_close(self) -> None:
        self.dismiss(self.changed)


class HistoryScreen(MemoryOverlay["Change"]):
    """The changes of one note (or USER.md), newest first; `b` puts back the content before
    the highlighted change (undo), `a` the content after it (redo). Esc closes; the result
    says whether anything was restored."""

    BINDINGS = [
        Binding("b", "restore('before')", "Restore before", id="memory.restore_before"),
        Binding("a", "restore('after')", "Restore after", id="memory.restore_after"),
        Binding("escape,q", "close", "Close", id="memory.history_close"),
    ]
    COLUMNS = ("when", "who", "op", "tainted", "change", "note")
    ITEM = "change"
    DETAIL = "diff"

    def __init__(self, memory: MemoryAccess, agent: str, name: str, label: str) -> None:
        super().__init__(
            memory,
            agent,
            id="memory-history",
            title=f"History of {label} ({name})",
            empty="No recorded changes.",
        )
        self.name_ = name

    @property
    def changes(self) -> list[Change]:
        """The note's changes, newest first."""
        return self.rows

    async def fetch(self) -> list[Change]:
        return await self.memory.history(self.agent, name=self.name_, limit=HISTORY_LIMIT)

    def cells(self, row: Change) -> list[str | Text]:
        return [
            row.at[:19].replace("T", " "),
            Text(row.by + (f" ({row.tool})" if row.tool else "")),
            row.op,
            Text("tainted", style="yellow") if row.tainted else "",
            row.id[:8],
            Text(row.note or (f"restores {row.restores[:8]}" if row.restores else "")),
        ]

    def loaded(self) -> None:
        if not self.rows:
            self._detail.update("")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        change = self.selected()
        if change is not None:
            self._show(change.id)

    @work(group="history-diff")
    async def _show(self, change_id: str) -> None:
        detail = await self.attempt(lambda: self.memory.change(self.agent, change_id))
        selected = self.selected()
        if detail is not None and selected is not None and selected.id == detail.change.id:
            self._detail.update(diff_text(detail.diff) if detail.diff else "(no difference)")

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
        result = await self.attempt(
            lambda: self.memory.restore(self.agent, change_id, version=version, provenance=USER)
        )
        if result is None:
            return
        if result.unchanged:
            self.notify(t("tui.memory.already"), markup=False)
            return
        self.changed = True
        self.notify(t("tui.memory.restored", version=version, change=change_id[:8]), markup=False)
        self._table.move_cursor(row=0)
        self.load()


class ProposalsScreen(MemoryOverlay["Proposal"]):
    """The changes the review may not make alone (deleting a note, emptying USER.md,
    shrinking a note by more than half): `y` applies the highlighted one as the user,
    `n` dismisses it. Esc closes; the result says whether any was applied."""

    BINDINGS = [
        Binding("y", "resolve(True)", "Apply", id="memory.proposal_apply"),
        Binding("n", "resolve(False)", "Dismiss", id="memory.proposal_dismiss"),
        Binding("escape,q", "close", "Close", id="memory.proposals_close"),
    ]
    COLUMNS = ("action", "name", "title", "reason", "by", "when")
    ITEM = "proposal"

    def __init__(self, memory: MemoryAccess, agent: str) -> None:
        super().__init__(
            memory,
            agent,
            id="memory-proposals",
            title=f"Proposals of {agent}'s review",
            empty="No open proposals.",
        )

    async def fetch(self) -> list[Proposal]:
        return await self.memory.proposals(self.agent)

    def cells(self, row: Proposal) -> list[str | Text]:
        return [
            row.action,
            Text(row.name),
            Text(row.title),
            Text(" ".join(row.reason.split())),
            row.by,
            row.at[:16].replace("T", " "),
        ]

    def loaded(self) -> None:
        self._show_detail()

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
        resolved = await self.attempt(
            lambda: self.memory.resolve_proposal(
                self.agent, proposal_id, apply=apply, provenance=USER
            )
        )
        if resolved is None:
            return
        self.changed = self.changed or apply
        self.notify(t("tui.memory.applied" if apply else "tui.memory.dismissed"), markup=False)
        self.load()
