"""Shared by the scan tests: scan one text as a file and look at what was found."""

from __future__ import annotations

from habakkuk.knowledge.scan import scan_files
from habakkuk.knowledge.skills.types import ScanReport


def scan(path: str, text: str | bytes) -> ScanReport:
    """The report of one file (text given as str is UTF-8)."""
    data = text.encode() if isinstance(text, str) else text
    return scan_files({path: data})


def rules(report: ScanReport, severity: str | None = None) -> set[str]:
    """The rule ids of the findings (of one severity when given)."""
    return {f.rule for f in report.findings if severity is None or f.severity == severity}
