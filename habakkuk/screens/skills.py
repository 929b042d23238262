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

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Markdown, Static

from habakkuk.engine.i18n import t
from habakkuk.knowledge.skills.types import SKILL_NAME, NeedsAcknowledgement
from habakkuk.screens.list_detail import ListDetailScreen, Listing, PaletteEntry
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
from habakkuk.widgets.fit_table import Cell

if TYPE_CHECKING:
    from habakkuk.knowledge.skills.types import Skill, SkillsAccess, SkillSummary

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


class SkillsScreen(ListDetailScreen["SkillSummary", "Skill"]):
    """The skills one agent sees: Enter or `v` views, `a` approves, `d` removes (asks
    first), `r` restores, `n` the next agent; Esc goes back to the chat."""

    DEFAULT_CSS = """
    SkillsScreen #skill-meta { color: $text-muted; }
    SkillsScreen #skill-caution { color: $text-warning; }
    SkillsScreen #skill-findings { margin-bottom: 1; color: $text-error; }
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
    SECTION = "Skills"
    PALETTE = (
        PaletteEntry("view", "view skill", "The skill's instructions and files", ("enter",)),
        PaletteEntry("approve", "approve skill", "Trust an installed skill"),
        PaletteEntry("remove", "remove skill", "Remove the skill; a backup is kept"),
        PaletteEntry("restore", "restore skill", "Put back a skill's newest backup"),
    )
    # An approval that needs the user's acknowledgement is raised for the caller to ask.
    RAISED = (NeedsAcknowledgement,)
    ITEM = "skill"
    COLUMNS = COLUMNS
    # At 80 cells a long source or name gives way, then the source and the last use are
    # left out (the pane says where the skill came from).
    SHRINK: ClassVar[dict[str, int]] = {"source": 10, "skill": 12}
    DROP = ("source", "last used")
    ROW_ACTION = "view"
    PER_AGENT = True

    def __init__(self) -> None:
        super().__init__(id="skills", title="Skills")
        self.skill: Skill | None = None  # the skill shown in the pane
        self.last_removed = ""  # what `r` offers to restore first
        self._meta = Static("", id="skill-meta", classes="pane-line")
        self._caution = Static("", id="skill-caution", classes="pane-line")
        self._findings = Static("", id="skill-findings", classes="pane-line")
        self._preview = Markdown("", id="skill-preview")
        self._scroll = VerticalScroll(self._findings, self._preview, id="skill-scroll")

    @property
    def service(self) -> SkillsAccess:
        """The skills, through the app's host."""
        skills: SkillsAccess = self.runtime.skills
        return skills

    @property
    def skills(self) -> list[SkillSummary]:
        """The listed skills, in order."""
        return self.items

    def compose_pane(self) -> ComposeResult:
        with Vertical(id="skill-pane", classes="list-pane"):
            yield self._meta
            yield self._caution
            yield self._scroll

    def on_mount(self) -> None:
        self._caution.display = False
        self._findings.display = False

    # -- the list ------------------------------------------------------------------------

    async def listing(self) -> Listing[SkillSummary]:
        service, agent = self.service, self.agent
        skills = await self.call(lambda: service.list_skills(agent)) or []
        untrusted = sum(not s.trusted for s in skills)
        title = t("tui.title.skills", agent=agent, skills=t("tui.count.skills", count=len(skills)))
        if untrusted:
            title += " · " + t("tui.skills.untrusted", count=untrusted)
        return Listing(
            skills,
            title,
            t("tui.empty.skills"),
        )

    def key(self, item: SkillSummary) -> str:
        return item.name

    def cells(self, item: SkillSummary) -> list[Cell]:
        return [
            Text(item.name),
            trust_cell(item),
            verdict_cell(item),
            Text(last_used_word(item)),
            source_cell(item),
        ]

    # -- the pane ------------------------------------------------------------------------

    async def fetch_detail(self, item: SkillSummary) -> Skill:
        return await self.service.skill(self.agent, item.name)

    def show_detail(self, item: SkillSummary | None, detail: Skill | None) -> None:
        self._show(detail)

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
            return self.can_change_agent()
        return True

    def action_view(self) -> None:
        """The highlighted skill whole: its instructions (after the caution) and files."""
        name = self.selected_id()
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
            self.notify(t("tui.skills.approved", name=name), markup=False)
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
            self.notify(
                t("tui.skills.removed", name=removed.name, backup=removed.backup), markup=False
            )
            self._show(None)
            self.reload()

    def action_restore(self) -> None:
        """Ask which skill to put back (the one removed last, else the highlighted one)."""
        offered = self.last_removed or (self.selected_id() or "")

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
            self.notify(t("tui.skills.restored", name=restored.name), markup=False)
            self.reload(keep=restored.name)
