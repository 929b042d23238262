"""The memory's secret scanner: text that looks like a credential is never stored.

`find_secret` names what matched ("an OpenAI key", "a card number"), never the value,
so the refusal can be shown and logged. The well-known formats are shared with the HTTP
API's redactor (engine/secret_shapes.py); this module adds what only a scanner needs:
password assignments, long random-looking tokens, Luhn-valid card numbers and the values
of the variables the config names as secrets.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from habakkuk.engine.secret_shapes import NAMED_KEY_SHAPES, URL_PASSWORD

_ASSIGNMENT = re.compile(
    r"(?i)(?<![a-z0-9])[a-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key"
    r"|access[_-]?key|private[_-]?key)[\"']?\s*[:=]\s*[\"']?([^\s\"',;]+)"
)
_AWS_SECRET = re.compile(
    r"(?i)aws[_-]?secret[_-]?(?:access[_-]?)?key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{30,}"
)
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{32,}")
_HEXISH = re.compile(r"[0-9a-fA-F-]+")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
# Values that stand for a secret without being one: "password: <yours>", "token: ${X}".
_PLACEHOLDER = re.compile(r"(?i)^(?:[<{$*x.]|none|null|changeme|redacted|example|required)")


def find_secret(text: str, extra_values: Iterable[str] | Mapping[str, str] = ()) -> str | None:
    """What secret `text` holds, as words for a message ("a private key"), or None.

    `extra_values`: the values of the variables the config names as secrets; a mapping
    (variable name -> value) lets the answer name the variable ("the value of $TOKEN").
    Values shorter than six characters are ignored: they would match ordinary words.
    """
    if not text:
        return None
    named = (
        extra_values.items()
        if isinstance(extra_values, Mapping)
        else (("", value) for value in extra_values)
    )
    for name, value in named:
        if value and len(value) >= 6 and value in text:
            return f"the value of ${name}" if name else "the value of a secret variable"
    for what, shape in NAMED_KEY_SHAPES:
        if shape.search(text):
            return what
    if URL_PASSWORD.search(text):
        return "credentials in a URL"
    if _AWS_SECRET.search(text):
        return "an AWS secret key"
    for match in _ASSIGNMENT.finditer(text):
        if _looks_like_password(match.group(1)):
            return "a password assignment"
    for match in _TOKEN.finditer(text):
        if looks_random(match.group(0)):
            return "a long random-looking token"
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            return "a card number"
    return None


def _looks_like_password(value: str) -> bool:
    """An assigned value that is a credential, not a word ("password: stored in 1Password")."""
    value = value.strip().rstrip(".")
    if len(value) < 6 or _PLACEHOLDER.match(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    return has_digit or has_symbol or len(value) >= 12


def looks_random(token: str) -> bool:
    """A long token of mixed letters and digits with high entropy (an API key, a session id).

    Hex strings (git hashes, SHA-256 digests, UUIDs) are let through: notes cite them, and
    the formats that are hex and secret are caught by their shape or their variable.
    Identifiers and paths (words, few digits) stay below the thresholds.
    """
    if len(token) < 32 or _HEXISH.fullmatch(token):
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


def luhn_valid(digits: str) -> bool:
    """The Luhn check every payment card number passes."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0
