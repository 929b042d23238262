"""Personas: the voice /personality NAME gives a session (spec 000 "Chat commands").

A persona is text appended after the session's frozen system prompt in every model
request of the session, so the cached prefix (the frozen prompt) survives until the
persona changes. Five are built in; `HOME/personalities/NAME.md` adds more, and a file
named like a built-in replaces it (the person's own words win). The text is read at the
start of every turn, so an edited file takes effect on the next turn.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

PERSONALITIES_DIR = "personalities"
# A persona file larger than this is cut: it rides along with every request.
MAX_PERSONA_CHARS = 8_000
# A plain name: no path, no dot, nothing a file name could escape the folder with.
NAME = re.compile(r"[A-Za-z0-9_-]+")
# What clears the session's persona.
CLEARING = ("default", "off", "none")

BUILTIN: dict[str, str] = {
    "concise": (
        "Be concise. Lead with the answer, then only the detail that changes what the "
        "reader does next. Prefer short sentences and plain words; skip preambles, "
        "recaps and offers of further help. When a list is clearer than prose, use a "
        "short one."
    ),
    "warm": (
        "Be warm and encouraging. Acknowledge what the person is trying to do, explain "
        "things patiently, and celebrate progress without flattery. Stay honest: say "
        "clearly when something will not work, and suggest what will."
    ),
    "formal": (
        "Write in a formal, professional register: complete sentences, precise "
        "terminology, no slang, no emoji and no exclamation marks. Address the person "
        "courteously and keep opinions clearly separated from facts."
    ),
    "technical": (
        "Answer as a senior engineer speaking to another. Be precise: name the exact "
        "functions, flags, versions and error messages; show code or commands where they "
        "help; state trade-offs and assumptions; say what you verified and what you did "
        "not."
    ),
    "playful": (
        "Be playful and light-hearted: a little wit, a vivid example now and then, an "
        "occasional pun if it fits. Keep the substance exact; the fun never replaces "
        "the answer, and you turn serious when the person is."
    ),
}


def valid_name(name: str) -> bool:
    """Whether `name` is a plain persona name ([A-Za-z0-9_-]+)."""
    return NAME.fullmatch(name) is not None


def folder(home: Path) -> Path:
    """Where the home's own persona files live."""
    return home / PERSONALITIES_DIR


def choices(home: Path) -> list[str]:
    """Every persona /personality can choose: the built-ins, then the home's files."""
    found: list[str] = []
    try:
        found = sorted(
            path.stem
            for path in folder(home).glob("*.md")
            if path.is_file() and valid_name(path.stem)
        )
    except OSError as exc:
        log.warning("personalities folder %s unreadable: %s", folder(home), exc)
    return list(BUILTIN) + [name for name in found if name not in BUILTIN]


def persona_text(home: Path, name: str) -> str | None:
    """The text of persona `name`: its file under the home, else the built-in; None when
    neither exists (a file that vanished: the turn goes on without it)."""
    if not valid_name(name):
        return None
    path = folder(home) / f"{name}.md"
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return BUILTIN.get(name)
    except OSError as exc:
        log.warning("persona %s: %s unreadable: %s", name, path, exc)
        return BUILTIN.get(name)
    return text[:MAX_PERSONA_CHARS] or BUILTIN.get(name)
