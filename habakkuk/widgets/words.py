"""Words as the terminal's screens write them: counts ("1 note", "2 notes", "1,024
notes") and texts declared in English at import time, said in the language in use."""

from __future__ import annotations

from habakkuk.engine.i18n import known, t


def counted(count: int, word: str, plural: str = "") -> str:
    """`count` and `word`, in the plural (`plural`, else word + "s") unless it is one."""
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def said(key: str, english: str) -> str:
    """`key` in the language in use when the catalogs have it, else `english` (a palette
    entry or a title declared at import time, looked up only when it is shown)."""
    return t(key) if known(key) else english
