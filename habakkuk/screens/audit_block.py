"""The security audit's block of the terminal's overview (habakkuk.screens.overview): a
count by severity, then each finding (info ones left out); the fixes, whose paths are
long, are `habakkuk security audit`'s (and the dashboard's)."""

from __future__ import annotations

from habakkuk.engine.audit_findings import Finding, summary_line
from habakkuk.engine.i18n import t

# At most this many findings are listed; `habakkuk security audit` lists them all.
SHOWN = 12


def audit_text(findings: list[Finding]) -> str:
    """The block's text: the summary line, a line per finding, where to find the fixes."""
    serious = [finding for finding in findings if finding.severity != "info"]
    if not serious:
        return t("audit.overview_none")
    lines = [summary_line(findings)]
    for finding in serious[:SHOWN]:
        label = t(f"audit.severity.{finding.severity}")
        lines.append(f"{label} {finding.subject}: {finding.problem}")
    lines.append(t("audit.overview_hint"))
    return "\n".join(lines)
