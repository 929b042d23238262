"""The taint of one run of a turn: whether outside content has entered it.

A run starts clean. The registry marks it when a network tool begins to run
(fetch_url, MCP servers, search...), and the turn marks it when the model used the
provider's hosted web search. From then on every later call of the run sees it: a
memory_save writes `trust: untrusted`, and the profile and identity refuse changes.
It is set when the tool starts, not when it ends, so a save in the same parallel
batch as a fetch counts as tainted too.
"""

from __future__ import annotations


class Taint:
    """A one-way flag for one run of a turn, with what set it first."""

    __slots__ = ("_reason",)

    def __init__(self, reason: str = "") -> None:
        self._reason = reason

    @property
    def tainted(self) -> bool:
        return bool(self._reason)

    @property
    def reason(self) -> str:
        """What first tainted the run ("fetch_url", "hosted web search"), else ""."""
        return self._reason

    def mark(self, reason: str) -> None:
        """Taint the run; the first reason is kept. Nothing clears it."""
        if not self._reason:
            self._reason = reason or "external content"

    def __bool__(self) -> bool:
        return self.tainted

    def __repr__(self) -> str:
        return f"Taint({self._reason!r})"
