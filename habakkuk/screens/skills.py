"""The Skills screen: an agent's own skills and the shared ones, each with where it came
from, whether it is trusted, the scan's verdict and its last use; the highlighted
skill's instructions and files beside the list.

Keys: Enter or `v` opens the skill in a viewer (habakkuk/screens/skills_viewer.py),
`a` approves an installed skill (trusts it; one the scan found dangerous shows every
finding first and needs `a` again, as the skills service asks), `d` removes one after a
yes (it is backed up first), `r` restores a skill's newest backup by name, `n` shows the
next agent's. The pane shows the install scan's findings above the instructions.
Every call goes through the skills service (`runtime.skills`, a SkillsAccess) in a
worker; the screen never reads a skill folder. A refusal of the service (a plugin's
skill, nothing to restore) is a notice, never a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Markdown, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.knowledge.skills.types import SKILL_NAME, NeedsAcknowledgement
from habakkuk.screens.base import RuntimeScreen
from habakkuk.screens.skills_viewer import (
    ApproveDangerous,
    SkillViewer,
    files_text,
    findings_text,
    last_used_word,
    trust_word,
    verdict_word,
)
from habakkuk.screens.text_prompt import Confirm, TextPrompt
from habakkuk.widgets.fit_table import FitTable
from habakkuk.widgets.footer import KeyFooter
from habakkuk.widgets.words import counted

if TYPE_CHECKING:
    from habakkuk.knowledge.skills.types import Skill, SkillsAccess, SkillSummary

T = TypeVar("T")

# The screen's palette entries: title, help, the action they run.
PALETTE = (
    ("Skills: view skill", "The skill's instructions and files (enter, v)", "view"),
    ("Skills: approve skill", "Trust an installed skill (a)", "approve"),
    ("Skills: remove skill", "Remove the skill; a backup is kept (d)", "remove"),
    ("Skills: restore skill", "Put back a skill's newest backup (r)", "restore"),
)
COLUMNS = ("skill", "trust", "scan", "last used", "source")
SOURCE_CELLS = 40
VERDICT_STYLES = {"clean": "green", "caution": "yellow", "dangerous": "bold red"}


def source_cell(skill: SkillSummary) -> Text:
    """Where the skill came from: own, hand, the install source or the plugin (a long
    source cut, so the columns before it stay in view; the pane shows it whole)."""
    source = skill.source or skill.scope
    if len(source) > SOURCE_CELLS:
        source = source[: SOURCE_CELLS - 1] + "…"
    return Text(source)


def trust_cell(skill: SkillSummary) -> Text:
    return Text(trust_word(skill), style="" if skill.trusted else "bold yellow")


def verdict_cell(skill: SkillSummary) -> Text:
    return Text(verdict_word(skill), style=VERDICT_STYLES.get(skill.verdict or "", "dim"))


class SkillsScreen(RuntimeScreen):
    """The skills one agent sees: Enter or `v` views, `a` approves, `d` removes (asks
    first), `r` restores, `n` the next agent; Esc goes back to the chat."""

    DEFAULT_CSS = """
    SkillsScreen #skills-body { height: 1fr; }
    SkillsScreen #skill-table { width: 3fr; height: 1fr; }
    SkillsScreen #skill-pane { width: 2fr; height: 1fr; border-left: solid $panel; }
    SkillsScreen #skill-meta { height: auto; padding: 0 1; color: $text-muted; }
    SkillsScreen #skill-caution { height: auto; padding: 0 1; color: $text-warning; }
    SkillsScreen #skill-findings { height: auto; padding: 0 1; margin-bottom: 1;
                                   color: $text-error; }
    SkillsScreen #skill-scroll { height: 1fr; }
    SkillsScreen #skill-preview { margin: 0 1; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("v", "view", "View", id="skills.view"),  # and Enter on a row
        Binding("a", "approve", "Approve", id="skills.approve"),
        Binding("d", "remove", "Remove", id="skills.remove"),
        Binding("r", "restore", "Restore", id="skills.restore"),
        Binding("n", "next_agent", "Agent", id="skills.agent", show=False),
        Binding("escape", "back", "Back", id="skills.back", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="skills")
        self.agent = ""
        self.skills: list[SkillSummary] = []  # the rows, in order
        self.skill: Skill | None = None  # the skill shown in the pane
        self.last_removed = ""  # what `r` offers to restore first
        # Bumped by every listing and pane request: late results are dropped.
        self._generation = 0
        self._pane = 0
        self._resumed = False
        self._title = Static("Skills", classes="section-title")
        # At 80 cells a long source or name gives way, then the source and the last use
        # are left out (the pane says where the skill came from).
        self._table = FitTable(
            id="skill-table", shrink={"source": 10, "skill": 12}, drop=("source", "last used")
        )
        self._meta = Static("", id="skill-meta")
        self._caution = Static("", id="skill-caution")
        self._findings = Static("", id="skill-findings")
        self._preview = Markdown("", id="skill-preview")
        self._scroll = VerticalScroll(self._findings, self._preview, id="skill-scroll")
        self._empty = Static("", classes="empty")

    @property
    def service(self) -> SkillsAccess:
        """The skills, through the app's host."""
        skills: SkillsAccess = self.runtime.skills
        return skills

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._empty  # at the top, where no toast covers it
        with Horizontal(id="skills-body"):
            yield self._table
            with Vertical(id="skill-pane"):
                yield self._meta
                yield self._caution
                yield self._scroll
        yield KeyFooter()

    def on_mount(self) -> None:
        self._empty.display = False
        self._caution.display = False
        self._findings.display = False
        self._table.fill(COLUMNS, [])
        self._table.focus()

    def runtime_ready(self) -> None:
        self.agent = self.runtime.config.agent(None).name
        self.reload()

    def on_screen_resume(self) -> None:
        # Skills change elsewhere too (skill_save, the CLI, the curator): read again when
        # the screen comes back (its first showing is runtime_ready's load).
        if self._resumed and self._loaded and self.has_runtime:
            self.reload()
        self._resumed = True

    async def call(self, what: Callable[[], Awaitable[T]]) -> T | None:
        """Run one skills call; a refusal is a notice and None (an approval that needs the
        user's acknowledgement is raised for the caller to ask)."""
        try:
            return await what()
        except NeedsAcknowledgement:
            raise
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None

    # -- the list ------------------------------------------------------------------------

    def reload(self, keep: str | None = None) -> None:
        """Read the list again, the cursor on `keep` (default: the highlighted skill)."""
        self._generation += 1
        self._load(self._generation, keep or self.selected_name())

    @work(group="skills-list")
    async def _load(self, generation: int, keep: str | None) -> None:
        if not self.has_runtime:
            return
        service, agent = self.service, self.agent
        found = await self.call(lambda: service.list_skills(agent))
        if generation != self._generation:
            return
        skills = found or []
        self.skills = list(skills)
        untrusted = sum(not s.trusted for s in skills)
        extra = f" · {untrusted} untrusted" if untrusted else ""
        count = counted(len(skills), "skill")
        self._title.update(Content(f"Skills · {agent} · {count}{extra}"))
        table = self._table
        table.fill(
            COLUMNS,
            [
                (
                    skill.name,
                    [
                        Text(skill.name),
                        trust_cell(skill),
                        verdict_cell(skill),
                        Text(last_used_word(skill)),
                        source_cell(skill),
                    ],
                )
                for skill in skills
            ],
        )
        if skills:
            names = [s.name for s in skills]
            table.move_cursor(row=names.index(keep) if keep in names else 0)
        self._empty.update(
            Content(
                ""
                if skills
                else "No skills yet. The agent saves them with skill_save; "
                "`habakkuk skills install SOURCE` adds one."
            )
        )
        self._empty.display = not skills
        if not skills:
            self._show(None)
        self.refresh_bindings()

    def selected(self) -> SkillSummary | None:
        """The highlighted skill."""
        row = self._table.cursor_row
        if 0 <= row < len(self.skills):
            return self.skills[row]
        return None

    def selected_name(self) -> str | None:
        skill = self.selected()
        return skill.name if skill is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table is not self._table:
            return
        skill = self.selected()
        if skill is not None:
            self._read(skill.name)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on the table: the DataTable takes the key, the screen opens the viewer.
        if event.data_table is self._table:
            self.action_view()

    # -- the pane ------------------------------------------------------------------------

    @work(group="skills-pane")
    async def _read(self, name: str) -> None:
        self._pane += 1
        pane, service, agent = self._pane, self.service, self.agent
        skill = await self.call(lambda: service.skill(agent, name))
        if skill is not None and pane == self._pane and self.selected_name() == name:
            self._show(skill)

    def _show(self, skill: Skill | None) -> None:
        self.skill = skill
        if skill is None:
            self._meta.update("")
            self._caution.display = False
            self._findings.display = False
            self._preview.update("")
        else:
            s = skill.summary
            where = s.scope if s.source in ("", s.scope) else f"{s.scope} · {s.source}"
            # Where it came from and its last use, whole (the list may leave them out).
            parts = [s.description, f"{where} · last used {last_used_word(s)}"]
            if s.pinned:
                parts.append("pinned: the curator leaves it alone")
            self._meta.update(Content("\n".join(p for p in parts if p)))
            caution = "Untrusted: installed, not approved. a approves it."
            if s.needs_acknowledgement:
                caution = (
                    "Untrusted, and the scan found it dangerous (below). a shows why, "
                    "then a again approves it."
                )
            self._caution.update(Content(caution))
            self._caution.display = not s.trusted
            self._findings.update(Content(findings_text(s)))
            self._findings.display = bool(s.findings)
            self._preview.update(skill.body + "\n\n" + files_text(skill.files))
        self.refresh_bindings()

    # -- keys ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        skill = self.skill
        if action == "view":
            return self.selected() is not None
        if action == "approve":
            return skill is not None and not skill.summary.trusted
        if action == "remove":
            return skill is not None and skill.summary.scope != "plugin"
        if action == "next_agent":
            return self.has_runtime and len(self.runtime.config.agents) > 1
        return True

    def palette_commands(self) -> Iterable[SystemCommand]:
        """The screen's actions for the command palette, `Skills: ...`."""
        for title, about, action in PALETTE:
            yield SystemCommand(title, about, getattr(self, f"action_{action}"))

    def action_back(self) -> None:
        self.happ.action_go("chat")

    def action_next_agent(self) -> None:
        """Show the skills the next agent sees."""
        names = list(self.runtime.config.agents)
        if len(names) > 1:
            at = names.index(self.agent) if self.agent in names else -1
            self.agent = names[(at + 1) % len(names)]
            self._show(None)
            self.reload()

    def action_view(self) -> None:
        """The highlighted skill whole: its instructions (after the caution) and files."""
        name = self.selected_name()
        if name is None:
            return
        if self.skill is not None and self.skill.name == name:
            self._open(self.skill)
        else:
            self._read_and_open(name)  # the pane has not caught up with the cursor yet

    @work(group="skills-pane")
    async def _read_and_open(self, name: str) -> None:
        service, agent = self.service, self.agent
        skill = await self.call(lambda: service.skill(agent, name))
        if skill is not None:
            self._open(skill)

    def _open(self, skill: Skill) -> None:
        self.app.push_screen(SkillViewer(skill))

    def action_approve(self) -> None:
        """Trust the shown installed skill (as `habakkuk skills approve NAME`)."""
        skill = self.skill
        if skill is not None and not skill.summary.trusted:
            self._approve(skill.name)

    @work(group="skills-edit")
    async def _approve(self, name: str, acknowledged: bool = False) -> None:
        # The service says what needs the user's acknowledgement (a dangerous scan): its
        # refusal carries the findings, shown before a second `a` approves.
        service = self.service
        try:
            approved = await self.call(lambda: service.approve(name, acknowledged=acknowledged))
        except NeedsAcknowledgement as exc:

            def answered(yes: bool | None) -> None:
                if yes:
                    self._approve(name, acknowledged=True)

            self.app.push_screen(ApproveDangerous(exc.skill), answered)
            return
        if approved is not None:
            self.notify(f"{name} is approved: its instructions are trusted now.", markup=False)
            self.reload(keep=name)

    def action_remove(self) -> None:
        """Remove the shown skill after a yes (backed up first; `r` puts it back)."""
        skill = self.skill
        if skill is None or skill.summary.scope == "plugin":
            return
        name = skill.name

        def done(yes: bool | None) -> None:
            if yes:
                self._remove(name)

        self.app.push_screen(
            Confirm(f"Remove the skill {name!r}? A backup is kept; r restores it."), done
        )

    @work(group="skills-edit")
    async def _remove(self, name: str) -> None:
        service, agent = self.service, self.agent
        removed = await self.call(lambda: service.remove(agent, name))
        if removed is not None:
            self.last_removed = removed.name
            self.notify(f"Removed {removed.name}; the backup is {removed.backup}.", markup=False)
            self._show(None)
            self.reload()

    def action_restore(self) -> None:
        """Ask which skill to put back (the one removed last, else the highlighted one)."""
        offered = self.last_removed or (self.selected_name() or "")

        def check(value: str) -> str | None:
            if SKILL_NAME.fullmatch(value):
                return None
            return f"{value!r} is not a skill name: lowercase letters, digits and '-'"

        def done(name: str | None) -> None:
            if name:
                self._restore(name)

        self.app.push_screen(
            TextPrompt(
                "Restore which skill's newest backup? Enter restores, Esc cancels.", offered, check
            ),
            done,
        )

    @work(group="skills-edit")
    async def _restore(self, name: str) -> None:
        service, agent = self.service, self.agent
        restored = await self.call(lambda: service.restore(agent, name))
        if restored is not None:
            if self.last_removed == restored.name:
                self.last_removed = ""
            self.notify(f"Restored {restored.name}.", markup=False)
            self.reload(keep=restored.name)
