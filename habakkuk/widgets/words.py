"""Counts as the terminal's screens write them: "1 note", "2 notes", "1,024 notes"."""

from __future__ import annotations


def counted(count: int, word: str, plural: str = "") -> str:
    """`count` and `word`, in the plural (`plural`, else word + "s") unless it is one."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"
