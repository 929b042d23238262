"""IRC's wire format: one line per message, parsed and written (RFC 1459 / 2812 with the
IRCv3 message tags), and text cut so each line a server relays stays within 512 bytes.

A line is `[@tags ][:prefix ]COMMAND params [:trailing]` ending in CRLF, 512 bytes at
most counting the CRLF but not the tags. What a server relays of our PRIVMSG carries our
whole prefix (`:nick!user@host PRIVMSG target :text`), so a text must fit what is left
after that prefix, not after the shorter line we send: `text_budget` counts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A line's length without its tags, CRLF included (RFC 1459 2.3).
LINE_LIMIT = 512
# The longest host a network shows for us before we learn ours (RFC 1035's 63-byte label
# is what cloaks and reverse names keep to in practice); what we learn replaces it.
ASSUMED_HOST = 63
_TAG_ESCAPES = {":": ";", "s": " ", "\\": "\\", "r": "\r", "n": "\n"}


@dataclass(frozen=True)
class Line:
    """One parsed line: tags, prefix (`nick!user@host` or a server), command, params."""

    command: str
    params: tuple[str, ...] = ()
    prefix: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def nick(self) -> str:
        """The nick of the prefix (the whole prefix when it is a server's)."""
        return self.prefix.split("!", 1)[0]

    @property
    def userhost(self) -> tuple[str, str]:
        """The prefix's user and host ("" each when it has none)."""
        _, _, rest = self.prefix.partition("!")
        user, _, host = rest.partition("@")
        return user, host

    def param(self, index: int) -> str:
        """The param at `index`, "" when there are fewer."""
        return self.params[index] if index < len(self.params) else ""


def _unescape_tag(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, "")
        out.append(_TAG_ESCAPES.get(following, following))
    return "".join(out)


def parse_line(raw: str) -> Line:
    """One line (without its CRLF) as a Line; ValueError when it has no command."""
    rest = raw.lstrip(" ")
    tags: dict[str, str] = {}
    if rest.startswith("@"):
        blob, _, rest = rest[1:].partition(" ")
        for item in blob.split(";"):
            if item:
                key, _, value = item.partition("=")
                tags[key] = _unescape_tag(value)
        rest = rest.lstrip(" ")
    prefix = ""
    if rest.startswith(":"):
        prefix, _, rest = rest[1:].partition(" ")
        rest = rest.lstrip(" ")
    trailing: str | None = None
    if " :" in rest:
        rest, _, trailing = rest.partition(" :")
    elif rest.startswith(":"):
        rest, trailing = "", rest[1:]
    words = rest.split()
    if not words:
        raise ValueError(f"an IRC line without a command: {raw[:80]!r}")
    params = words[1:] + ([trailing] if trailing is not None else [])
    return Line(words[0].upper(), tuple(params), prefix, tags)


def _escape_tag(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace(";", "\\:").replace(" ", "\\s")
        .replace("\r", "\\r").replace("\n", "\\n")
    )  # fmt: skip


def format_line(command: str, *params: str, tags: dict[str, str] | None = None) -> bytes:
    """A line to send (with IRCv3 client tags when given): the last param goes as
    trailing (after ':') when it needs to. ValueError for a param holding CR, LF or NUL
    (it would end the line early)."""
    head = ""
    if tags:
        head = "@" + ";".join(f"{k}={_escape_tag(v)}" if v else k for k, v in tags.items()) + " "
    for param in params:
        if any(char in param for char in "\r\n\0"):
            raise ValueError("an IRC param cannot hold CR, LF or NUL")
    words = [command, *params[:-1]]
    if params:
        last = params[-1]
        words.append(f":{last}" if not last or " " in last or last.startswith(":") else last)
    return (head + " ".join(words) + "\r\n").encode("utf-8")


def text_budget(nick: str, user: str, host: str, command: str, target: str) -> int:
    """The bytes a text may take so the relayed `:nick!user@host COMMAND target :text\\r\\n`
    stays within 512 (an unknown host counts as ASSUMED_HOST bytes)."""
    host_bytes = len(host.encode()) if host else ASSUMED_HOST
    prefix = 1 + len(nick.encode()) + 1 + len(user.encode()) + 1 + host_bytes
    overhead = prefix + 1 + len(command) + 1 + len(target.encode()) + 2 + 2
    return LINE_LIMIT - overhead


def split_text(text: str, budget: int) -> list[str]:
    """A line of text cut into pieces of at most `budget` UTF-8 bytes, at the last space
    when there is one in the second half of a piece, never inside a character. Empty
    pieces are left out; a text of only spaces gives none."""
    if budget < 8:
        raise ValueError(f"an IRC line budget of {budget} bytes leaves no room for text")
    pieces: list[str] = []
    rest = text
    while rest.strip():
        encoded = rest.encode("utf-8")
        if len(encoded) <= budget:
            pieces.append(rest)
            break
        cut = budget
        while cut and (encoded[cut] & 0xC0) == 0x80:  # not inside a character
            cut -= 1
        head = encoded[:cut].decode("utf-8")
        space = head.rfind(" ")
        if space >= len(head) // 2:
            head = head[:space]
        pieces.append(head)
        rest = rest[len(head) :].lstrip(" ")
    return [piece for piece in pieces if piece.strip()]


CTCP = "\x01"


def ctcp(text: str) -> tuple[str, str] | None:
    """A CTCP message's command and argument (`\\x01ACTION waves\\x01`), else None."""
    if not text.startswith(CTCP):
        return None
    body = text.strip(CTCP)
    command, _, argument = body.partition(" ")
    return command.upper(), argument
