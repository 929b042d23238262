"""What happened to a tool call: it ran (ok or error), was denied, was stopped, or never ran.

The registry knows the outcome as it decides and runs a call and publishes it as the
`status` of tool.end. A stored result keeps only its text and is_error (the wire
shape of spec 001), so `stored_outcome` reads it back from the opening words that the
registry and the turn loop write for each kind; the words are defined here, next to
the reading, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Literal

Outcome = Literal["ok", "error", "denied", "interrupted", "not_run"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "error", "denied", "interrupted", "not_run")

# How the result text of each kind begins (see ToolRegistry and the turn loop).
DENIED_OPENINGS = ("denied", "refused", "blocked by a tool_before hook")
INTERRUPTED_OPENING = "interrupted"
NOT_RUN_OPENING = "not run"


def stored_outcome(text: str, is_error: bool) -> Outcome:
    """The outcome of a result read back from a transcript."""
    if not is_error:
        return "ok"
    if text.startswith(DENIED_OPENINGS):
        return "denied"
    if text.startswith(NOT_RUN_OPENING):
        return "not_run"
    if text.startswith(INTERRUPTED_OPENING):
        return "interrupted"
    return "error"
