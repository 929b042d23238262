"""What the security audit finds (habakkuk.services.audit), as every surface shows it:
`habakkuk security audit`, the terminal's overview and the dashboard's (GET /api/overview).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["critical", "high", "medium", "low", "info"]
# Worst first: the order findings are listed in.
SEVERITIES: tuple[Severity, ...] = ("critical", "high", "medium", "low", "info")
# A finding of one of these keeps `habakkuk security audit` exiting non-zero.
BLOCKING: frozenset[Severity] = frozenset({"critical", "high"})


@dataclass(frozen=True)
class Finding:
    """One thing the audit found unsafe (or, for `info`, worth knowing), with its fix.

    `chmod` is set when the fix is a permission change `--fix` may apply: the file or
    folder `path` gets mode `chmod`. Every other fix is the person's to make.
    """

    severity: Severity
    check: str  # which check: modes, owner, reach, channel, http, metrics, webhook, mcp, ...
    subject: str  # what it is about: a path, or a config key such as channels.tg
    problem: str  # one line, in the language in use
    fix: str  # one line: the command or the setting that fixes it
    path: str = ""
    chmod: int | None = None

    @property
    def blocking(self) -> bool:
        """Whether this finding keeps the audit's exit code non-zero."""
        return self.severity in BLOCKING


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Worst first; within a severity by check, then subject."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.check, f.subject))


def severity_counts(findings: list[Finding]) -> dict[Severity, int]:
    """How many findings of each severity (every severity present, 0 when none)."""
    counts: dict[Severity, int] = dict.fromkeys(SEVERITIES, 0)
    for finding in findings:
        counts[finding.severity] += 1
    return counts


def summary_line(findings: list[Finding]) -> str:
    """The count by severity as one line, in the language in use."""
    from habakkuk.engine.i18n import t

    counts = severity_counts(findings)
    return t(
        "audit.summary",
        critical=counts["critical"],
        high=counts["high"],
        medium=counts["medium"],
        low=counts["low"],
        info=counts["info"],
    )
