"""Over the Skills screen: one skill whole, its SKILL.md instructions as Markdown (after
the caution an untrusted skill carries and the install scan's findings) and the list of
its supporting files; and the question that approving a skill the scan found dangerous
asks, with every finding, answered by pressing `a` again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown, Static

from habakkuk.knowledge.skills.views import findings_lines
from habakkuk.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from habakkuk.knowledge.skills.types import Skill, SkillSummary


def trust_word(skill: SkillSummary) -> str:
    """How a list shows trust: "trusted", or "untrusted" for an unapproved install."""
    return "trusted" if skill.trusted else "untrusted"


def verdict_word(skill: SkillSummary) -> str:
    """How a list shows the scan: its verdict, or "-" when it was never scanned."""
    return skill.verdict or "-"


def last_used_word(skill: SkillSummary) -> str:
    """How a list shows the last use: "YYYY-MM-DD HH:MM" (UTC), or "never"."""
    if not skill.last_used:
        return "never"
    return skill.last_used[:16].replace("T", " ")


def files_text(files: Iterable[str]) -> str:
    """The supporting files as a Markdown list (or a line saying there are none)."""
    listed = [f"- `{path}`" for path in files]
    return "\n".join(["**Files**", "", *listed]) if listed else "*No supporting files.*"


def findings_text(skill: SkillSummary) -> str:
    """The scan's findings as plain text, one per line ("" when it found nothing). Shown
    with Content, never as Markdown or markup: the file names come from the skill."""
    return "\n".join(findings_lines(skill))


def skill_markdown(skill: Skill) -> str:
    """The body as the viewer shows it: the instructions, then the files."""
    return skill.body.rstrip() + "\n\n---\n\n" + files_text(skill.files) + "\n"


class SkillViewer(Screen[None]):
    """One skill's instructions and files, read only; Esc or q closes."""

    DEFAULT_CSS = """
    SkillViewer #skill-viewer-meta { height: auto; padding: 0 1; color: $text-muted; }
    SkillViewer #skill-viewer-caution { height: auto; padding: 0 1; color: $text-warning; }
    SkillViewer #skill-viewer-findings { height: auto; padding: 0 1; margin-bottom: 1;
                                         color: $text-error; }
    SkillViewer VerticalScroll { height: 1fr; }
    SkillViewer #skill-viewer-body { margin: 0 1; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close", id="skills.viewer_close")]

    def __init__(self, skill: Skill) -> None:
        super().__init__(id="skill-viewer")
        self.skill = skill

    def compose(self) -> ComposeResult:
        s = self.skill.summary
        yield Static(Content(f"Skill {s.name} · {s.scope}"), classes="section-title")
        meta = [
            s.description,
            f"source {s.source} · {trust_word(s)} · scan {verdict_word(s)} · "
            f"last used {last_used_word(s)}",
        ]
        yield Static(Content("\n".join(meta)), id="skill-viewer-meta")
        caution = Static(Content(self.skill.caution), id="skill-viewer-caution")
        caution.display = bool(self.skill.caution)
        yield caution
        with VerticalScroll():
            findings = Static(Content(findings_text(s)), id="skill-viewer-findings")
            findings.display = bool(s.findings)
            yield findings
            yield Markdown(skill_markdown(self.skill), id="skill-viewer-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


class ApproveDangerous(ModalScreen[bool]):
    """Approving a skill the scan found dangerous: every finding, then `a` again approves
    it (the user read them); n or Esc keeps it untrusted. Enter answers nothing, so a
    habit of pressing it never trusts a dangerous skill."""

    DEFAULT_CSS = """
    ApproveDangerous { align: center middle; }
    ApproveDangerous > Vertical { width: 90%; max-width: 110; height: auto; max-height: 90%;
                                  padding: 0 1; border: round $error; background: $surface; }
    ApproveDangerous .title { text-style: bold; }
    ApproveDangerous VerticalScroll { height: auto; max-height: 1fr; }
    ApproveDangerous #approve-findings { color: $text-error; }
    ApproveDangerous .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("a", "answer(True)", "Approve anyway", id="skills.approve_dangerous"),
        Binding("n,escape", "answer(False)", "Keep untrusted", id="skills.keep_untrusted"),
    ]

    def __init__(self, skill: SkillSummary) -> None:
        super().__init__(id="approve-dangerous")
        self.skill = skill

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Content(f"Approve {self.skill.name}? Its scan found it dangerous:"),
                classes="title",
            )
            with VerticalScroll():
                yield Static(Content(findings_text(self.skill)), id="approve-findings")
            yield Static(
                "a: approve anyway, I read every finding · n or Esc: keep it untrusted",
                classes="hint",
            )

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
