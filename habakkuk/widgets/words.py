"""Texts the terminal's screens declare in English at import time (a palette entry, a
title), said in the language in use when they are shown. Counts are the catalogs'
counted keys (`t("tui.count.notes", count=n)`), whose plural each language chooses."""

from __future__ import annotations

from habakkuk.engine.i18n import known, t


def said(key: str, english: str) -> str:
    """`key` in the language in use when the catalogs have it, else `english` (a palette
    entry or a title declared at import time, looked up only when it is shown)."""
    return t(key) if known(key) else english
