"""The extracted text, cut at a byte budget: where it was cut and how to read on.

Extractors stream: they add the text piece by piece, and the first piece past the
budget raises `Full`, so a 50,000-row sheet stops being parsed once the output is
full instead of being read to its end for text nobody will see. `offset` skips that
many characters of the text first (reading on after a cut).
"""

from __future__ import annotations

MAX_OUTPUT_BYTES = 400_000


class Full(Exception):
    """The budget is spent: the extractor stops where it is."""


class Sink:
    """Text pieces up to `limit` UTF-8 bytes, after skipping `offset` characters."""

    def __init__(self, limit: int = MAX_OUTPUT_BYTES, offset: int = 0) -> None:
        self.limit = limit
        self.offset = offset
        self.where = ""  # the part being read ("page 12", "sheet Sales"), for the cut note
        self.seen = 0  # characters of the text so far, skipped ones included
        self.cut_at = ""  # where the text was cut ("" while it is whole)
        self._parts: list[str] = []
        self._used = 0

    def add(self, piece: str) -> None:
        """Append `piece`; raises Full (after keeping what fits) when the budget is spent."""
        if self.seen + len(piece) <= self.offset:
            self.seen += len(piece)
            return
        if self.seen < self.offset:
            piece = piece[self.offset - self.seen :]
            self.seen = self.offset
        size = len(piece) if piece.isascii() else len(piece.encode("utf-8"))
        if self._used + size <= self.limit:
            self._parts.append(piece)
            self._used += size
            self.seen += len(piece)
            return
        room = self.limit - self._used
        kept = piece.encode("utf-8")[:room].decode("utf-8", errors="ignore")
        self._parts.append(kept)
        self._used += len(kept.encode("utf-8"))
        self.seen += len(kept)
        self.cut_at = self.where or "the text"
        raise Full

    def text(self) -> str:
        """The text kept so far."""
        return "".join(self._parts)

    def note(self) -> str:
        """What the reader is told after the text: where it was cut and how to go on, or
        that the offset was past the end; "" for a whole text."""
        if self.cut_at:
            return (
                f"[output cut at {self.limit // 1000:,} KB, in {self.cut_at}; "
                f"read on with offset={self.seen}]"
            )
        if self.offset and self.seen <= self.offset:
            return f"[offset {self.offset} is past the end of the text ({self.seen} characters)]"
        return ""
