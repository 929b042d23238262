"""Over the Skills screen: one skill whole, its SKILL.md instructions as Markdown (after
the caution an untrusted skill carries) and the list of its supporting files."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Markdown, Static

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


def skill_markdown(skill: Skill) -> str:
    """The body as the viewer shows it: the instructions, then the files."""
    return skill.body.rstrip() + "\n\n---\n\n" + files_text(skill.files) + "\n"


class SkillViewer(Screen[None]):
    """One skill's instructions and files, read only; Esc or q closes."""

    DEFAULT_CSS = """
    SkillViewer #skill-viewer-meta { height: auto; padding: 0 1; color: $text-muted; }
    SkillViewer #skill-viewer-caution { height: auto; padding: 0 1; color: $text-warning; }
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
            yield Markdown(skill_markdown(self.skill), id="skill-viewer-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
