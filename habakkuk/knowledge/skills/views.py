"""The skills as every surface shows them: JSON shapes and the name check they share.

The HTTP API (spec 001 "Skills") and `habakkuk skills ... --json` print the same
shapes, so both call these functions. Spec 001 names `name`, `description` and `shared`
(not the agent's own); every listing adds where the skill came from and whether it is
trusted, the scan's verdict, its last use and whether the curator leaves it alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from habakkuk.engine.errors import HabakkukError

from .types import SKILL_NAME, RemovedSkill, ScanReport, Skill, SkillSummary


def check_name(name: str) -> str:
    """`name` when it is a skill name (`^[a-z0-9][a-z0-9-]{0,63}$`), else HabakkukError
    naming it (so `../x`, `%2e%2e` or `Été` never reach a folder)."""
    if not SKILL_NAME.fullmatch(name):
        shown = name if len(name) <= 70 else name[:67] + "..."
        raise HabakkukError(
            f"{shown!r} is not a skill name: lowercase letters, digits and '-', "
            "at most 64 characters, starting with a letter or digit"
        )
    return name


def summary_json(skill: SkillSummary) -> dict[str, Any]:
    """A listed skill: {"name", "description", "shared", "scope", "source", "trusted",
    "verdict", "last_used", "updated", "pinned", "plugin"}."""
    return {
        "name": skill.name,
        "description": skill.description,
        "shared": skill.shared,
        "scope": skill.scope,
        "source": skill.source,
        "trusted": skill.trusted,
        "verdict": skill.verdict,
        "last_used": skill.last_used,
        "updated": skill.updated,
        "pinned": skill.pinned,
        "plugin": skill.plugin,
    }


def skills_json(skills: Iterable[SkillSummary]) -> dict[str, Any]:
    """GET /api/skills/{agent} and `skills list --json`: {"skills": [...]} by name."""
    return {"skills": [summary_json(s) for s in skills]}


def skill_json(skill: Skill) -> dict[str, Any]:
    """One skill: the listing's fields plus "body" (SKILL.md after the frontmatter),
    "files" (supporting files, relative to its folder) and "caution" ("" when trusted)."""
    body = summary_json(skill.summary)
    body["body"] = skill.body
    body["files"] = list(skill.files)
    body["caution"] = skill.caution
    return body


def removed_json(removed: RemovedSkill) -> dict[str, Any]:
    """A removal: {"removed": name, "backup": the folder `restore` puts back}."""
    return {"removed": removed.name, "backup": removed.backup}


def report_json(report: ScanReport) -> dict[str, Any]:
    """A scan report with its reasons as the user reads them (dangerous first)."""
    body = report.as_json()
    body["reasons"] = report.reasons
    return body


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
