"""The JSON shapes of skills, shared by `habakkuk skills --json` and the HTTP API.

Spec 001 "Skills": a listed skill is {"name", "description", "shared"} and one skill
adds {"body", "files"}; the fields after those (scope, source, trust, verdict, last use,
the scan's reasons and findings, whether approving needs an acknowledgement, ...) are what
the CLI, the dashboard and the terminal's Skills view show as well.
An install's plan and outcome have shapes of their own here so every surface that
installs prints the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from habakkuk.knowledge.skills.types import (
    InstallPlan,
    RemovedSkill,
    ScanReport,
    Skill,
    SkillSummary,
)

if TYPE_CHECKING:
    from habakkuk.knowledge.hub.install import Outcome


def summary_json(skill: SkillSummary) -> dict[str, Any]:
    """One listed skill."""
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
        "warning": skill.warning,
        "reasons": skill.reasons,
        "findings": [f.as_json() for f in skill.findings],
        "needs_acknowledgement": skill.needs_acknowledgement,
    }


def skills_json(skills: list[SkillSummary]) -> dict[str, Any]:
    """GET /api/skills/{agent}."""
    return {"skills": [summary_json(s) for s in skills]}


def skill_json(skill: Skill) -> dict[str, Any]:
    """GET /api/skills/{agent}/{name}: the summary, the instructions and the files."""
    return {
        **summary_json(skill.summary),
        "body": skill.body,
        "files": list(skill.files),
        "caution": skill.caution,
    }


def report_json(report: ScanReport) -> dict[str, Any]:
    """A scan: its verdict, one line per reason (dangerous first) and the findings."""
    return {**report.as_json(), "reasons": report.reasons}


def plan_json(plan: InstallPlan) -> dict[str, Any]:
    """What an install or update would place, with the scan behind it."""
    return {
        "name": plan.name,
        "source": plan.source,
        "resolved": plan.resolved,
        "tree_hash": plan.tree_hash,
        "files": list(plan.files),
        "replaces": plan.replaces,
        "warnings": list(plan.warnings),
        "scan": report_json(plan.report),
    }


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """What an install or update did with one skill."""
    return {
        "name": outcome.name,
        "status": outcome.status,
        "folder": str(outcome.folder) if outcome.folder else None,
        "changed": list(outcome.changed),
        "removed": list(outcome.removed),
        "backup": outcome.backup,
        "plan": plan_json(outcome.plan) if outcome.plan else None,
    }


def removed_json(removed: RemovedSkill) -> dict[str, Any]:
    """What `remove` did: the skill and the backup `restore` puts back."""
    return {"name": removed.name, "backup": removed.backup}


def plan_lines(plan: InstallPlan) -> list[str]:
    """An install plan as the CLIs print it before anything is placed: where it comes
    from, its files and tree hash, the scan's verdict and every reason."""
    short = plan.resolved[:12] if len(plan.resolved) == 40 else plan.resolved
    replaces = " (replaces the installed one)" if plan.replaces else ""
    lines = [
        f"{plan.name}: from {plan.source} at {short}{replaces}",
        f"  {len(plan.files)} file(s), tree {plan.tree_hash}",
        *(f"  warning: {warning}" for warning in plan.warnings),
        f"  scan: {plan.report.verdict}",
    ]
    lines += [f"    {reason}" for reason in plan.report.reasons]
    return lines


def findings_lines(skill: SkillSummary) -> list[str]:
    """The scan's reasons as the CLI and the terminal print them: a heading, one line each
    (dangerous first); nothing when the scan found nothing."""
    if not skill.findings:
        return []
    return [f"scan: {skill.verdict or 'not scanned'}, {len(skill.findings)} finding(s):"] + [
        f"  {reason}" for reason in skill.reasons
    ]
