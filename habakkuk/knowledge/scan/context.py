"""Where the scanners put what they notice: one file's findings, and the way down.

A scanner (shell, Python, Markdown, the regex rules) is handed a :class:`Context` for the
file it reads. It adds findings with a 1-based line and hands embedded code (``python -c``,
a decoded blob, a fenced block) back through :meth:`Context.scan`, which picks the scanner
for the language; :meth:`Context.nested` pins every finding of the embedded text to the line
of the construct that holds it (the embedded text's own lines mean nothing to a reader).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from habakkuk.knowledge.skills.types import Finding, Severity

# How deep embedded code is followed (sh -c inside python -c inside a decoded blob...):
# deeper text is not read, which only matters for input built to be nested.
MAX_DEPTH = 8

Dispatch = Callable[["Context", str, str, int, int], None]


@dataclass
class Context:
    """One file's scan: its findings so far, and the dispatcher for embedded code."""

    file: str
    dispatch: Dispatch
    findings: list[Finding] = field(default_factory=list)
    fixed_line: int | None = None  # set on a nested context: every finding goes here
    _seen: set[tuple[str, str, int]] = field(default_factory=set)

    def add(self, severity: Severity, rule: str, line: int, message: str) -> None:
        """Record a finding (once per rule and line)."""
        if self.fixed_line is not None:
            line = self.fixed_line
        key = (severity, rule, line)
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(Finding(severity, rule, self.file, line, message))

    def scan(self, lang: str, text: str, line: int, depth: int) -> None:
        """Scan embedded text in `lang` ("shell", "python", "markdown", "js"...)."""
        if depth > MAX_DEPTH or not text.strip():
            return
        self.dispatch(self, lang, text, line, depth)

    def nested(self, line: int) -> Context:
        """A context sharing these findings that reports everything at `line`."""
        child = Context(self.file, self.dispatch, self.findings, line, self._seen)
        if self.fixed_line is not None:
            child.fixed_line = self.fixed_line
        return child
