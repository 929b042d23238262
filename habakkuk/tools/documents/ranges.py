"""Page and slide selections such as "1-5,8,12-": parsed from the tool's input, checked
against the document's count."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import DocumentError

_PART = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$")


@dataclass(frozen=True)
class Ranges:
    """Inclusive 1-based ranges; an open end (None) runs to the last one."""

    spans: tuple[tuple[int, int | None], ...]
    text: str

    def pick(self, count: int, what: str, name: str) -> list[int]:
        """The chosen numbers among 1..count, in order, each once; a selection that picks
        nothing (all past the end) is an error naming the count."""
        chosen: set[int] = set()
        for first, last in self.spans:
            chosen.update(range(first, min(count, last if last is not None else count) + 1))
        if not chosen:
            raise DocumentError(f"{name} has {count} {what}; {what}={self.text!r} picks none")
        return sorted(chosen)


def parse_ranges(text: str, what: str) -> Ranges:
    """`text` ("1-5,8,12-") as Ranges; a malformed one is a DocumentError saying why."""
    spans: list[tuple[int, int | None]] = []
    for part in text.split(","):
        match = _PART.match(part)
        if match is None:
            raise DocumentError(f"{what}={text!r}: write numbers and ranges, e.g. '1-5,8,12-'")
        first = int(match.group(1))
        last: int | None = first
        if match.group(2):
            last = int(match.group(3)) if match.group(3) else None
        if first < 1 or (last is not None and last < first):
            raise DocumentError(f"{what}={text!r}: {part.strip()!r} is not a range from 1 up")
        spans.append((first, last))
    return Ranges(tuple(spans), text)
