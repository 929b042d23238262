"""Tool names: `mcp__<server>__<tool>`, safe for every model API, at most 64 characters.

Characters model APIs reject become `_`. A name that is too long, or that
sanitizes into the same spelling as a sibling's, is cut and given a short hash
of the original, so the spelling depends only on the server's names and never
on the order they were listed in.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

MAX_NAME = 64
PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _sanitize(text: str) -> str:
    return _UNSAFE.sub("_", text)


def _hashed(candidate: str, original: str) -> str:
    digest = hashlib.sha256(original.encode("utf-8")).hexdigest()[:8]
    return f"{candidate[: MAX_NAME - len(digest) - 1]}_{digest}"


def tool_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Habakkuk names for one server's tools: {real name: model-facing name}."""
    originals = list(dict.fromkeys(tools))
    candidates = {t: f"{PREFIX}{_sanitize(server)}__{_sanitize(t)}" for t in originals}
    counts = Counter(candidates.values())
    names: dict[str, str] = {}
    for tool, candidate in candidates.items():
        clash = counts[candidate] > 1
        if len(candidate) > MAX_NAME or clash:
            names[tool] = _hashed(candidate, f"{server}\x00{tool}")
        else:
            names[tool] = candidate
    return names
