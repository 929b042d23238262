"""The redactor: secrets replaced before text reaches the disk (spec 000 "Operations": Logs).

One redactor per process, `REDACTOR`: the log file's handler (engine/logfile.py), jobs'
errors, payloads and results (engine/jobs.py), transcripts and compaction summaries
(engine/sessions.py), usage records (engine/llm/usage.py) and schedules' last output
(work/store.py) pass their text through it at their one write, so a provider's error
body holding the key, a tool result that printed a token or a traceback with a URL's
password is stored with `[REDACTED]` in its place.

What it replaces:

* the value of every variable the config names as a secret (every `*_env` setting, MCP
  env and header variables, `secrets.refs`) and the secret-looking `.env` entries, set
  with `REDACTOR.use_values(...)` when the runtime opens (`secret_values` finds them);
* the well-known token shapes of secret_shapes.NAMED_KEY_SHAPES (provider keys, Slack,
  GitHub, AWS, Google, Telegram, JWTs, private keys, bearer credentials), URL
  credentials, secret query parameters, `Authorization:` headers and AWS secret keys
  (after their setting's name, or within a line after an access key id).

The shapes are one precompiled alternation searched once per text; the values are
plain substring checks. Text with nothing to hide is returned as it came (no copy).
Secret shapes are recognised in secret_shapes.py only; this module reads them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from .secret_shapes import NAMED_KEY_SHAPES, SECRET_NAME

MARK = "[REDACTED]"
# Values shorter than this are not redacted: they would match ordinary words.
SHORTEST_VALUE = 6

# Shapes this module adds to secret_shapes' named ones. In each, the `keep` group (a
# header's name, a setting's name, a URL's scheme and user) stays; the rest goes.
_EXTRA_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    # Authorization: Bearer X / Basic X / token X ... (the scheme word is kept).
    (
        ("authorization",),
        r"(?i)(?P<keep>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
        r"(?:(?:basic|bearer|token|digest|negotiate|ntlm|api-?key)\s+)?)[A-Za-z0-9._~+/=-]{8,}",
    ),
    # aws_secret_access_key = X
    (
        ("secret",),
        r"(?i)(?P<keep>aws[_-]?secret[_-]?(?:access[_-]?)?key[\"']?\s*[:=]\s*[\"']?)"
        r"[A-Za-z0-9/+=]{30,}",
    ),
    # https://user:PASSWORD@host (secret_shapes.URL_PASSWORD's shape). Woken by "@", one
    # character (memchr): "://" is slow to look for in text full of colons (times).
    (
        ("@",),
        r"(?i)(?P<keep>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(?=@)",
    ),
    # ?token=X, &api_key=X (secret_shapes.SECRET_QUERY's names).
    (
        ("?", "&"),
        r"(?i)(?P<keep>[?&](?:[a-z_]*token|key|api_key|apikey|secret|password|sig|signature"
        r"|auth)=)[^&#\s\"']+",
    ),
)
# What each named shape cannot match without (lower case): a text holding none of them
# is not searched with it (Python's re has no literal prefilter for these patterns, and
# searching every shape costs ~100 µs a line). A shape not listed is always searched.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "a private key": ("private key",),
    "an Anthropic key": ("sk-ant-",),
    "an OpenAI key": ("sk-",),
    "a Stripe key": ("_live_", "_test_"),
    "a GitHub token": ("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"),
    "a Slack token": ("xox",),
    "an AWS access key": ("akia", "asia"),
    "a Google API key": ("aiza",),
    "a JWT": ("eyj",),
    "a bearer credential": ("bearer",),
}
_TELEGRAM = "a Telegram bot token"
# An AWS secret key shortly after its access key id, on the same line (AKIA... SECRET).
_AWS_PAIR = re.compile(
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b[^\n]{0,80}?(?<![A-Za-z0-9/+])"
    r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)


def _shapes() -> list[tuple[tuple[str, ...] | None, re.Pattern[str]]]:
    """(triggers, shape): None triggers for a shape searched in every text."""
    shapes: list[tuple[tuple[str, ...] | None, re.Pattern[str]]] = [
        (triggers, re.compile(pattern)) for triggers, pattern in _EXTRA_SHAPES
    ]
    for what, shape in NAMED_KEY_SHAPES:
        if what != _TELEGRAM:
            shapes.append((_TRIGGERS.get(what), shape))
    return shapes


_SHAPES = _shapes()
_TELEGRAM_SHAPES = [shape for what, shape in NAMED_KEY_SHAPES if what == _TELEGRAM]


def _replace(match: re.Match[str]) -> str:
    kept = match.groupdict().get("keep")
    return MARK if kept is None else kept + MARK


def _aws_pair(match: re.Match[str]) -> str:
    return match.group(0)[: match.start("secret") - match.start()] + MARK


def _telegram_like(text: str) -> bool:
    """A colon after eight digits (a bot token's id): looked for with str.find, since a
    search with the shape itself starts at every character."""
    colon = text.find(":", 8)
    while colon >= 0:
        if text[colon - 8 : colon].isdigit():
            return True
        colon = text.find(":", colon + 1)
    return False


# Each trigger with the shapes it wakes: one `in` test per trigger, then only the shapes
# woken are searched, in their order (the extra shapes first, as they keep a prefix).
_WAKES: list[tuple[str, int]] = [
    (trigger, index) for index, (triggers, _) in enumerate(_SHAPES) for trigger in (triggers or ())
]
_ALWAYS = frozenset(index for index, (triggers, _) in enumerate(_SHAPES) if triggers is None)


def _redact_shapes(text: str) -> str:
    low = text.lower()  # for the triggers only: offsets are never read from it
    woken = {index for trigger, index in _WAKES if trigger in low}
    if woken or _ALWAYS:
        for index in sorted(woken | _ALWAYS):
            text = _SHAPES[index][1].sub(_replace, text)
    if _telegram_like(text):
        for shape in _TELEGRAM_SHAPES:
            text = shape.sub(MARK, text)
    return text


class Redactor:
    """Replaces secrets in text: the configured values and the well-known shapes."""

    def __init__(self, values: Iterable[str] = ()):
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()
        self.use_values(values)

    def use_values(self, values: Iterable[str]) -> None:
        """Redact these values from now on (the longest first: a value inside another
        is not left half-redacted), beside the shapes. Replaces the previous set."""
        kept = {v for v in values if v and len(v) >= SHORTEST_VALUE}
        with self._lock:
            self._values = tuple(sorted(kept, key=len, reverse=True))

    def add_values(self, values: Iterable[str]) -> None:
        """Also redact these values (a key found later: the keyring, a secret manager)."""
        self.use_values((*self._values, *values))

    @property
    def values(self) -> tuple[str, ...]:
        return self._values

    def text(self, text: str) -> str:
        """`text` with every secret replaced by [REDACTED]; `text` itself when none."""
        if not text:
            return text
        for value in self._values:
            if value in text:
                text = text.replace(value, MARK)
        if "AKIA" in text or "ASIA" in text:  # the pair first: the id alone is a shape
            text = _AWS_PAIR.sub(_aws_pair, text)
        return _redact_shapes(text)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it redacted (dicts and lists walked;
        keys kept); other values as they are."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


# The process's redactor: every path that stores text uses it (see the module's text).
REDACTOR = Redactor()


def redact(text: str) -> str:
    """`text` through the process's redactor."""
    return REDACTOR.text(text)


def redact_optional(text: str | None) -> str | None:
    """`redact` for a value that may be None (a job's error)."""
    return None if text is None else REDACTOR.text(text)


def secret_values(config: Any, env: Any, env_file_values: Mapping[str, str]) -> list[str]:
    """The values the redactor hides for this home: the variables the config names as
    secrets (secret_shapes.secret_variables, plus `secrets.refs`) and the `.env` entries
    whose name says they are a credential or whose value has a token's shape."""
    from .secret_shapes import looks_random, plain, secret_variables

    found = dict(secret_variables(config, env, env_file_values, shortest=SHORTEST_VALUE))
    data = plain(config)
    refs = data.get("secrets", {}).get("refs", {}) if isinstance(data, dict) else {}
    if isinstance(refs, dict):
        for name in refs:
            value = env.get(str(name))
            if value and len(value) >= SHORTEST_VALUE:
                found.setdefault(str(name), value)
    for name, value in env_file_values.items():
        if not value or len(value) < SHORTEST_VALUE or name in found:
            continue
        if SECRET_NAME.search(name) or looks_random(value) or _redact_shapes(value) != value:
            found[name] = value
    return sorted(set(found.values()))


def redact_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's stored blocks (llm.types.block_to_json) with the words redacted: the
    text of text, context and tool result blocks and a tool call's input. Thinking and
    provider blocks are left as they are: their signatures and encrypted parts are
    replayed to the provider, which refuses them changed."""
    out = blocks
    for index, block in enumerate(blocks):
        kind = block.get("type")
        if kind in ("text", "context", "tool_result"):
            key = "text"
        elif kind == "tool_use":
            key = "input"
        else:
            continue
        value = block.get(key)
        cleaned = REDACTOR.value(value)
        if cleaned != value:
            if out is blocks:
                out = list(blocks)
            out[index] = {**block, key: cleaned}
    return out
