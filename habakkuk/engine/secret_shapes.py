"""What a secret looks like: key formats, URL credentials and the variables the config names.

One place for the rule, used by the redactor of the HTTP API (server/api.py replaces the
shapes in the effective config) and by the memory's scanner (knowledge/secrets.py refuses
to store text holding one), so a format added here is both hidden and refused.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# A config key whose value is itself a credential (not the name of a variable holding one).
SECRET_NAME = re.compile(
    r"(^|_)(token|password|passwd|secret|api_key|apikey|key|credentials?|private_key)$", re.I
)
# The scheme starts where a run of its characters starts: tried from every letter of a
# long word, it read the rest of the word each time.
URL_PASSWORD = re.compile(r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@", re.I)
SECRET_QUERY = re.compile(
    r"([?&](?:[a-z_]*token|key|api_key|apikey|secret|password|sig|signature|auth)=)[^&#\s]+", re.I
)

# (what it is, its shape): well-known credential formats. The first match names the find.
NAMED_KEY_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    (what, re.compile(pattern))
    for what, pattern in (
        (
            "a private key",
            # Headers in any case; the body up to its END line (an 8192-bit key is 6.5 KB),
            # looked for within 16 KB so that many headers cannot make a slow search.
            r"(?i)-----BEGIN [A-Z ]*PRIVATE KEY[A-Z ]*-----"
            r"(?:[\s\S]{0,16384}?-----END [A-Z ]*PRIVATE KEY[A-Z ]*-----)?",
        ),
        ("an Anthropic key", r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
        ("an OpenAI key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"),
        ("a Stripe key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("a GitHub token", r"\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}"),
        ("a GitHub token", r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
        ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("an AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("a Google API key", r"\bAIza[0-9A-Za-z_-]{30,}"),
        ("a JWT", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        # Also inside a Bot API URL (/bot123456789:AA.../getMe), where no \b is before it.
        ("a Telegram bot token", r"(?:\b|(?<=bot))\d{8,10}:[A-Za-z0-9_-]{35}\b"),
        # A digit in it: "bearer credentials" in prose is not one.
        ("a bearer credential", r"(?i)\bbearer\s+(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,}"),
    )
]
KEY_SHAPES: list[re.Pattern[str]] = [shape for _, shape in NAMED_KEY_SHAPES]


def plain(value: Any) -> Any:
    """A config dataclass as JSON-ready data (derived fields left out)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.init and not f.name.startswith("_")
        }
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def named_variables(data: Any, parent: str = "") -> set[str]:
    """Every variable the config names: *_env values, MCP env and header maps."""
    names: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            if key.endswith("_env") or key == "key_env":
                if isinstance(value, str):
                    names.add(value)
                elif isinstance(value, list):
                    names |= {v for v in value if isinstance(v, str)}
            elif key in ("env", "headers") and isinstance(value, dict):
                for item in value.values():
                    if isinstance(item, str):
                        names |= set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", item))
                        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", item):
                            names.add(item)
            else:
                names |= named_variables(value, key)
    elif isinstance(data, list):
        for item in data:
            names |= named_variables(item, parent)
    return names


def secret_variables(
    config: Any, env: Any, env_file_values: Mapping[str, str], *, shortest: int = 6
) -> dict[str, str]:
    """Variable name -> value of every secret this home holds, for the memory's scanner.

    The variables the config names (key_env, MCP env and headers) with their values in
    `env` (anything with `get(name)`), and the `.env` entries whose name says they are a
    credential (TOKEN, PASSWORD, SECRET, API_KEY, ...). Values shorter than `shortest`
    are left out: they would match ordinary words.
    """
    found: dict[str, str] = {}
    for name in sorted(named_variables(plain(config))):
        value = env.get(name)
        if value and len(value) >= shortest:
            found[name] = value
    for name, value in env_file_values.items():
        if value and len(value) >= shortest and SECRET_NAME.search(name):
            found.setdefault(name, value)
    return found


_HEX_TOKEN = re.compile(r"[0-9a-fA-F-]+")  # secret_scan's _HEXISH: hex, UUIDs


def looks_random(token: str) -> bool:
    """A long token of mixed letters and digits with high entropy (an API key, a session id).

    Hex strings (git hashes, SHA-256 digests, UUIDs) are let through: notes cite them, and
    the formats that are hex and secret are caught by their shape or their variable.
    Identifiers and paths (words, few digits) stay below the thresholds.
    """
    if len(token) < 32 or _HEX_TOKEN.fullmatch(token):
        return False
    uppers = sum(c.isupper() for c in token)
    lowers = sum(c.islower() for c in token)
    digits = sum(c.isdigit() for c in token)
    if uppers < 2 or lowers < 2 or digits < 2:
        return False
    # Words joined by separators (a path, a slug): every part short and lower-case-ish.
    parts = [p for p in re.split(r"[/_=+-]", token) if p]
    if len(parts) > 1 and all(len(p) < 16 for p in parts):
        return False
    return shannon_entropy(token) > 4.0


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`."""
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())
