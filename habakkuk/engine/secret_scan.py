"""Finding secrets in text: the one detector memory writes are refused with, and the one
logs can redact with.

`find_secrets(text)` lists what it finds as `Finding`s: what each is, in words for a
message ("an OpenAI key", "a PIN"; never the value), and where it is in `text`.
`find_secret(text)` names the first, which is all a refusal needs.

The text is read as it was written, and as a person or a paste may have disguised it:

* NFKC-normalised and without invisible format characters: a key typed in full-width
  letters (U+FF41 and on), or with zero-width spaces inside, reads as the key;
* with the line breaks inside a run of key characters removed: a key body wrapped at 28
  characters, or a key broken by a newline, reads whole;
* with the separators of a spelled-out key removed: "s k - p r o j …", "AKIA.IOSF.…".

It finds the well-known formats (secret_shapes.NAMED_KEY_SHAPES; private key headers in
any case), credentials in a URL, an Authorization header and Basic credentials, an AWS
secret, a value given to a secret-named word ("DB_PASS=…", "pw: …", "my password is
…"), a PIN, a passphrase, a long hex or base64 run just after a secret-ish word (a
signing key), a long random-looking token, a Luhn-valid card number, and the values of
the variables the config names as secrets. What only looks alike passes: hashes and
commit ids in prose, UUIDs, order and tracking numbers, paths, dates.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

# looks_random lives with the shapes: the log redactor's start reads it without loading
# this module's patterns.
from .secret_shapes import NAMED_KEY_SHAPES, URL_PASSWORD, looks_random


@dataclass(frozen=True)
class Finding:
    """One secret in a text: what it is, in words for a message, and where it is
    (`text[start:end]`; for a disguised one, the stretch of the text it was read from)."""

    what: str
    start: int
    end: int


def find_secrets(text: str, extra_values: Iterable[str] | Mapping[str, str] = ()) -> list[Finding]:
    """Every secret `text` holds, in the order of the text. A stretch two checks find is
    named by the surer one (an OpenAI key, rather than a long random-looking token).

    `extra_values`: the values of the variables the config names as secrets; a mapping
    (variable name -> value) lets a finding name the variable ("the value of $TOKEN").
    Values shorter than six characters are ignored: they would match ordinary words.
    """
    kept: list[Finding] = []  # not overlapping, in the order of the text
    starts: list[int] = []
    for finding in _findings(text, _values(extra_values)):
        index = bisect.bisect_right(starts, finding.start)
        if index > 0 and kept[index - 1].end > finding.start:
            continue  # overlaps the one before it
        if index < len(kept) and kept[index].start < finding.end:
            continue  # overlaps the one after it
        kept.insert(index, finding)
        starts.insert(index, finding.start)
    return kept


def find_secret(text: str, extra_values: Iterable[str] | Mapping[str, str] = ()) -> str | None:
    """What secret `text` holds, as words for a message ("a private key"), or None."""
    for finding in _findings(text, _values(extra_values)):
        return finding.what
    return None


def _values(extra: Iterable[str] | Mapping[str, str]) -> list[tuple[str, str]]:
    pairs = extra.items() if isinstance(extra, Mapping) else (("", v) for v in extra)
    return [(name, value) for name, value in pairs if value and len(value) >= 6]


# -- reading the text as it may have been disguised -------------------------------------


class _View:
    """A reading of the scanned text (normalised, joined, ...) and the way back from its
    offsets to the original's. `at[i]` is where the i-th piece starts in this reading,
    `src[i]` where it came from in `base`; a piece that replaced text maps to its start."""

    __slots__ = ("at", "base", "src", "text")

    def __init__(
        self,
        text: str,
        at: tuple[int, ...] = (),
        src: tuple[int, ...] = (),
        base: _View | None = None,
    ):
        self.text = text
        self.at = at
        self.src = src
        self.base = base

    def source(self, offset: int) -> int:
        """The original text's offset of this reading's character at `offset`."""
        position = offset
        if self.at:
            index = max(0, bisect.bisect_right(self.at, offset) - 1)
            position = self.src[index] + (offset - self.at[index])
            if index + 1 < len(self.src):
                position = min(position, max(self.src[index], self.src[index + 1] - 1))
        return position if self.base is None else self.base.source(position)

    def finding(self, what: str, start: int, end: int) -> Finding:
        return Finding(what, self.source(start), self.source(max(start, end - 1)) + 1)

    def edited(self, edits: Iterable[tuple[int, int, str]]) -> _View | None:
        """This reading with `edits` (start, end, replacement; in order, not overlapping)
        applied, or None when there are none."""
        text = self.text
        parts: list[str] = []
        at: list[int] = []
        src: list[int] = []
        position = out = 0
        for start, end, new in edits:
            if start > position:
                at.append(out)
                src.append(position)
                parts.append(text[position:start])
                out += start - position
            if new:
                at.append(out)
                src.append(start)
                parts.append(new)
                out += len(new)
            position = end
        if not at and position == 0:
            return None
        if position < len(text):
            at.append(out)
            src.append(position)
            parts.append(text[position:])
        return _View("".join(parts), tuple(at), tuple(src), self)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_KEY_CHAR = r"A-Za-z0-9+/=_-"
_KEY_RUN = re.compile(rf"[{_KEY_CHAR}]+")
_LINE_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*")
_SPACE = re.compile(r"[ \t]{1,2}")
_MIXED = re.compile(r"(?=[^\d]*\d)(?=[^A-Z]*[A-Z])")  # a digit and a capital letter
# A key spelled out: single characters with separators ("s k - p r o j", "A.K.I.A"), or
# short groups joined by dots ("AKIA.IOSF.ODNN.7EXA.MPLE").
_SPELLED = re.compile(
    rf"(?<![{_KEY_CHAR}])(?:[{_KEY_CHAR}][ .·•|*]{{1,3}}){{11,}}[{_KEY_CHAR}](?![{_KEY_CHAR}])"
)
_DOTTED = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_-]{1,8}(?:\.[A-Za-z0-9_-]{1,8}){3,}")
_SEPARATOR = re.compile(r"[ .·•|*]")


def _normalised(view: _View) -> _View | None:
    """NFKC without format characters (zero-width spaces, soft hyphens, joiners)."""
    text = view.text
    if text.isascii():
        return None
    # Each distinct character is normalised once (a text may repeat a few thousand times).
    normal = {
        char: "" if unicodedata.category(char) == "Cf" else unicodedata.normalize("NFKC", char)
        for char in set(_NON_ASCII.findall(text))
    }
    return view.edited(
        (m.start(), m.end(), normal[m.group()])
        for m in _NON_ASCII.finditer(text)
        if normal[m.group()] != m.group()
    )


def _joined(view: _View) -> _View | None:
    """Runs of key characters joined across a line break (a wrapped key body), or across
    a space when the run before is long and one side mixes digits and capitals (a key
    broken in two, then put on one line: a title, a chat message)."""
    text = view.text
    edits = []
    previous: tuple[int, int] | None = None
    for match in _KEY_RUN.finditer(text):
        if previous is not None:
            gap = text[previous[1] : match.start()]
            left, right = text[previous[0] : previous[1]], match.group()
            if (
                len(left) >= 4
                and len(right) >= 4
                and (
                    _LINE_BREAK.fullmatch(gap)
                    or (
                        _SPACE.fullmatch(gap)
                        and len(left) >= 8
                        and (_MIXED.match(left) or _MIXED.match(right))
                    )
                )
            ):
                edits.append((previous[1], match.start(), ""))
        previous = match.span()
    return view.edited(edits)


def _collapsed(view: _View) -> _View | None:
    runs = sorted(
        [m.span() for m in _SPELLED.finditer(view.text)]
        + [m.span() for m in _DOTTED.finditer(view.text)]
    )
    edits: list[tuple[int, int, str]] = []
    last = 0
    for start, end in runs:
        if start < last:
            continue  # overlapping runs: the first one is collapsed
        edits += [(m.start(), m.end(), "") for m in _SEPARATOR.finditer(view.text, start, end)]
        last = end
    return view.edited(edits)


# -- the checks -----------------------------------------------------------------------------

_AWS_SECRET = re.compile(
    r"(?i)aws[_-]?secret[_-]?(?:access[_-]?)?key[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{30,}"
)
_PRIVATE_KEY_HEADER = re.compile(r"(?i)(?<!-)-{3,}\s*begin [a-z0-9 ]*private key[a-z ]*-{3,}")
# The header is all a finding needs (the shared shape also reads the body, to redact it).
_NAMED = [(what, shape) for what, shape in NAMED_KEY_SHAPES if what != "a private key"]
_AUTHORIZATION = re.compile(
    r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:basic|bearer|token|digest|negotiate|ntlm|api-?key)\s+[A-Za-z0-9._~+/=-]{8,}"
)
_BASIC = re.compile(r"(?i)\bbasic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_CONNECTOR = r"[\"']?(?:\s*(?:[:=]|=>)\s*|\s+(?:is|was)\s+)[\"']?"
# A value given to a word that names a credential. The long words may end an identifier
# (dbpassword, MY_SECRET); pw and pwd must be words, and pass an identifier's last part
# or a word no other word qualifies (DB_PASS, "pass: …"; not "boarding pass: LH1234" or
# compass). No pattern here reads an identifier before its keyword: one that did took
# minutes over 64 KB of "A.B.A.B." (every start tried every end).
_ASSIGNMENT = re.compile(
    r"(?i)(?:password|passwd|passphrase|passcode|secret|token|api[ _-]?key|access[ _-]?key"
    r"|private[ _-]?key|secret[ _-]?key|signing[ _-]?key|credentials?"
    r"|(?<=[a-z0-9][_.-])pass|(?<![a-z0-9])(?<![a-z0-9] )pass|(?<![a-z0-9])(?:pwd|pw))"
    + _CONNECTOR
    + r"([^\s\"',;]+)"
)
_PIN = re.compile(
    r"(?i)(?<![a-z0-9])(?:pin(?:[ -]?(?:code|number))?|passcode)(?![a-z0-9])"
    r"(?:" + _CONNECTOR + r"|\s+)(\d{4,8})(?![.,:/-]?\d)"
)
_PASSPHRASE = re.compile(
    r"(?i)(?<![a-z0-9])(?:pass[ -]?phrase|wi-?fi[ -](?:password|passphrase|key|code)"
    r"|wpa2?[ -](?:key|passphrase|password)|network[ -]key)" + _CONNECTOR + r"([^\n\"']{6,120})"
)
# What a passphrase's place may say instead of the passphrase ("is on the sticker").
_REFERENCE = frozenset(
    {
        "see",
        "in",
        "on",
        "at",
        "the",
        "a",
        "an",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "stored",
        "saved",
        "kept",
        "written",
        "printed",
        "same",
        "unknown",
        "not",
        "no",
        "none",
        "under",
        "from",
        "changed",
        "set",
        "rotated",
        "shared",
        "managed",
        "required",
        "needed",
        "missing",
        "below",
        "above",
        "here",
        "there",
        "also",
        "still",
        "now",
        "empty",
        "blank",
        "hidden",
    }
)
# A long hex or base64 run shortly after a secret-ish word ("signing key 9c11…"), unless
# a word saying it is a hash or an id comes between ("key change: commit 4b82…").
_KEYISH = re.compile(
    r"(?i)(?<![a-z0-9])(?:keys?|secret|token|signing|hmac|password|passphrase|credentials?"
    r"|auth|private|apikey)(?![a-z0-9])"
)
_RUN_AFTER = re.compile(
    r"[^\n.;!?]{0,40}?"
    rf"(?<![{_KEY_CHAR}])([0-9a-fA-F]{{32,}}|[A-Za-z0-9+/_-]{{24,}}={{0,2}})(?![{_KEY_CHAR}])"
)
_HASHISH = re.compile(
    r"(?i)(?<![a-z])(?:commit|sha\d*|hash|digest|checksum|md5|fingerprint|uuid|id|rev|revision"
    r"|build|version|order|invoice|tracking|etag)(?![a-z])"
)
# Code that reads the secret from elsewhere: TOKEN = os.environ["X"], key: config.key.
_CODE_REFERENCE = re.compile(
    r"(?i)(?:os\.environ|os\.getenv|getenv|process\.env|environ|env|secrets|config|settings"
    r"|self|args|request|vault|keyring)[.\[(]"
)
_VARIABLE = re.compile(r"\$?[A-Z]+(?:_[A-Z]+)+")  # DEPLOY_TOKEN: a name, not a value
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{32,}")
_HEXISH = re.compile(r"[0-9a-fA-F-]+")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
# Values that stand for a secret without being one: "password: <yours>", "token: ${X}".
_PLACEHOLDER = re.compile(
    r"(?i)^(?:[<{$*%]|x{3,}|\.\.\.|none|null|changeme|redacted|example|required)"
)

Check = Callable[[str], Iterator[tuple[str, int, int]]]


def _shapes(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _PRIVATE_KEY_HEADER.finditer(text):
        yield "a private key", match.start(), match.end()
    for what, shape in _NAMED:
        for match in shape.finditer(text):
            yield what, match.start(), match.end()
    for match in _AWS_SECRET.finditer(text):
        yield "an AWS secret key", match.start(), match.end()


def _credentials(text: str) -> Iterator[tuple[str, int, int]]:
    for match in URL_PASSWORD.finditer(text):
        yield "credentials in a URL", match.start(), match.end()
    for match in _AUTHORIZATION.finditer(text):
        yield "an Authorization header", match.start(), match.end()
    for match in _BASIC.finditer(text):
        if _basic_pair(match.group(1)):
            yield "HTTP Basic credentials", match.start(), match.end()


def _assigned(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _ASSIGNMENT.finditer(text):
        if looks_like_password(match.group(1)):
            yield "a password assignment", match.start(), match.end()
    for match in _PIN.finditer(text):
        yield "a PIN", match.start(), match.end()
    for match in _PASSPHRASE.finditer(text):
        if _passphrase(match.group(1)):
            yield "a passphrase", match.start(), match.end()
    for word in _KEYISH.finditer(text):
        run = _RUN_AFTER.match(text, word.end())
        if run is None or _HASHISH.search(text, word.end(), run.start(1)):
            continue
        if _key_run(run.group(1)):
            kind = "hex" if _HEXISH.fullmatch(run.group(1)) else "base64"
            yield f"a {kind} key after a secret's name", word.start(), run.end()


def _random(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _TOKEN.finditer(text):
        if looks_random(match.group()):
            yield "a long random-looking token", match.start(), match.end()


def _cards(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            yield "a card number", match.start(), match.end()


# Every check reads the text as written and normalised; the shapes of keys are also
# looked for where line breaks or separators were taken out (a card number or a word's
# value is not: joining lines or dotted numbers would make them up).
_ALL: tuple[Check, ...] = (_shapes, _credentials, _assigned, _random, _cards)
_SHAPES: tuple[Check, ...] = (_shapes, _random)


def _findings(text: str, values: list[tuple[str, str]]) -> Iterator[Finding]:
    if not text:
        return
    original = _View(text)
    normal = _normalised(original)
    readings = [original] if normal is None else [original, normal]
    for view in readings:
        for name, value in values:
            start = view.text.find(value)
            while start >= 0:
                what = f"the value of ${name}" if name else "the value of a secret variable"
                yield view.finding(what, start, start + len(value))
                start = view.text.find(value, start + 1)
    for view in readings:
        for check in _ALL:
            for what, start, end in check(view.text):
                yield view.finding(what, start, end)
    base = readings[-1]
    for reading in (_joined(base), _collapsed(base)):
        if reading is not None:
            for check in _SHAPES:
                for what, start, end in check(reading.text):
                    yield reading.finding(what, start, end)


# -- what a value looks like -----------------------------------------------------------------


def looks_like_password(value: str) -> bool:
    """An assigned value that is a credential, not a word ("password: stored in 1Password"),
    a placeholder ("<yours>") or the name of a variable holding it (DEPLOY_TOKEN)."""
    if _CODE_REFERENCE.match(value):
        return False
    value = value.strip().strip("{}[]()<>").rstrip(".,:;!?*")
    if len(value) < 6 or _PLACEHOLDER.match(value) or _VARIABLE.fullmatch(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    return has_digit or has_symbol or len(value) >= 12


def _passphrase(value: str) -> bool:
    """The rest of a passphrase's line is one, unless it says where the passphrase is."""
    value = value.strip().rstrip(".,;:)")
    words = value.split()
    if len(value) < 8 or not words or _PLACEHOLDER.match(value):
        return False
    return words[0].lower() not in _REFERENCE


def _basic_pair(encoded: str) -> bool:
    """Base64 of "user:password" (what HTTP Basic carries), not a word after "basic"."""
    try:
        raw = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def _key_run(run: str) -> bool:
    """A run after a secret-ish word that is a key: hex, or base64 mixing letters and
    digits that is not words or an id joined by separators (a UUID, a slug)."""
    if _HEXISH.fullmatch(run) and "-" not in run:
        return True
    letters = sum(c.isalpha() for c in run)
    digits = sum(c.isdigit() for c in run)
    if letters < 2 or digits < 2:
        return False
    parts = [p for p in re.split(r"[/_+=-]", run) if p]
    return not (len(parts) > 1 and all(len(p) < 16 for p in parts))


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
