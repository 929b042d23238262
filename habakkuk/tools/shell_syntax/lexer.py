"""Shell lexer: text into words, control operators and redirections.

A small subset of POSIX/bash lexing, enough to find commands in text that an
agent or a script hands to ``sh -c``: quotes (``'...'``, ``"..."``,
``$'...'``), backslash escapes, line continuations, comments, command
substitutions (``$(...)``, backticks), process substitutions (``<(...)``,
``>(...)``), arithmetic ``$((...))``, parameter expansions, redirections with
their targets and here-documents with their bodies.

Each :class:`Word` keeps the text after quote removal (substitutions stay as
literal text) and its :attr:`Word.parts`, which say which pieces were quoted:
brace expansion, globbing and field splitting only apply to the unquoted ones
(see :mod:`habakkuk.tools.shell_syntax.expand`).

The lexer never raises: unterminated quotes or substitutions run to the end of
the text, as a shell reading a truncated script would see them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "EXPANSION",
    "LITERAL",
    "QUOTED",
    "Operator",
    "PartKind",
    "Redirect",
    "RedirectToken",
    "Token",
    "Word",
    "tokenize",
]

PartKind = Literal["literal", "quoted", "expansion"]
LITERAL: PartKind = "literal"  # unquoted text: brace expansion and globbing apply
QUOTED: PartKind = "quoted"  # quoted or escaped text: taken as it is
EXPANSION: PartKind = "expansion"  # unquoted $name, ${...}, $(...), `...`: field-split by a shell


@dataclass
class Word:
    """One shell word after quote removal; substitutions stay as literal text."""

    value: str
    subs: list[str] = field(default_factory=list)  # $(...) and `...` bodies
    procs: list[str] = field(default_factory=list)  # <(...) and >(...) bodies
    quoted: bool = False  # any part was quoted
    # The word's pieces in order, with how each was written; "".join of the texts is value.
    # Words made by hand (not by the lexer) get one QUOTED part: taken as they are.
    parts: list[tuple[str, PartKind]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.parts and self.value:
            self.parts = [(self.value, QUOTED)]

    def inner_texts(self) -> list[str]:
        """The shell texts this word runs when expanded (substitution bodies)."""
        return self.subs + self.procs


@dataclass
class Redirect:
    """A redirection: its operator (``>``, ``>>``, ``<``, ``<<``, ``<<<``, ``&>``, ...)."""

    op: str
    target: Word | None = None  # file, fd or here-document delimiter
    heredoc: str | None = None  # here-document body, for << and <<-
    fd: str | None = None  # the fd written before the operator (`3<>`, `0>&1`), else None

    @property
    def sets_stdin(self) -> bool:
        """Whether the redirection replaces the command's stdin (fd 0)."""
        if self.fd is not None:
            return self.fd == "0"
        return self.op in ("<", "<>", "<&", "<<", "<<-", "<<<")


@dataclass
class Operator:
    """A control operator: ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, ``(``, ``)``, newline."""

    value: str


@dataclass
class RedirectToken:
    """A redirection as it appears among the tokens."""

    redirect: Redirect


Token = Word | Operator | RedirectToken

REDIRECT_OPS = ("&>>", "<<<", "<<-", "&>", ">>", ">|", ">&", "<<", "<&", "<>", ">", "<")
CONTROL_OPS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|", "(", ")", "\n")
_REDIR_RE = re.compile("|".join(re.escape(op) for op in REDIRECT_OPS))
_CONTROL_RE = re.compile("|".join(re.escape(op) for op in CONTROL_OPS))
_SPECIAL_CHARS = frozenset(" \t\r\n\\'\"`$<>|&;()")
_PLAIN_RUN = re.compile(r"[^ \t\r\n\\'\"`$<>|&;()]+")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
# Deeper ( ) nesting inside substitutions is swallowed rather than recursed into.
MAX_NESTING = 64


def _scan_paren(text: str, i: int, nesting: int = 0) -> tuple[str, int]:
    """Return the body of a parenthesised region starting just after '(' and the end index."""
    depth = 1
    start = i
    n = len(text)
    if nesting > MAX_NESTING:
        return text[start:], n  # absurdly deep: swallow the rest rather than recurse
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == '"':
            i = _skip_double(text, i + 1, nesting + 1)
            continue
        if c == "`":
            _, i = _scan_backtick(text, i + 1)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1
        i += 1
    return text[start:], n


def _skip_double(text: str, i: int, nesting: int) -> int:
    """Index just past the closing double quote of a string whose body starts at i."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "$" and text.startswith("$(", i):
            _, i = _scan_paren(text, i + 2, nesting + 1)
            continue
        if c == "`":
            _, i = _scan_backtick(text, i + 1)
            continue
        i += 1
    return n


def _scan_backtick(text: str, i: int) -> tuple[str, int]:
    """Return the unescaped body of a backtick substitution starting at i and the end index."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "`\\$":
            out.append(text[i + 1])
            i += 2
            continue
        if c == "`":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), n


_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b"}
_ANSI_NUMERIC = re.compile(r"x([0-9a-fA-F]{1,2})|([0-7]{1,3})")


def _scan_ansi_c(text: str, i: int) -> tuple[str, int]:
    """Decode a $'...' string whose body starts at i (common escapes only)."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in _ANSI_ESCAPES:
                out.append(_ANSI_ESCAPES[nxt])
                i += 2
                continue
            m = _ANSI_NUMERIC.match(text, i + 1)
            if m:
                out.append(chr(int(m.group(1), 16) if m.group(1) else int(m.group(2), 8)))
                i = m.end()
                continue
            out.append(nxt)
            i += 2
            continue
        if c == "'":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), n


def _param_end(text: str, i: int) -> int:
    """End of the parameter expansion starting with '$' at i ($name, ${...}), or i + 1."""
    if text.startswith("${", i):
        end = text.find("}", i)
        return len(text) if end < 0 else end + 1
    m = _PARAM_NAME.match(text, i + 1)
    return m.end() if m else i + 1


class _Lexer:
    """One pass over the text; see :func:`tokenize`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = []
        self.parts: list[tuple[str, PartKind]] = []
        self.word: Word | None = None
        self.pending_heredocs: list[tuple[Redirect, bool]] = []
        self.awaiting_target: Redirect | None = None

    def start_word(self) -> Word:
        if self.word is None:
            self.word = Word("")
        return self.word

    def add(self, piece: str, kind: PartKind) -> None:
        if self.parts and self.parts[-1][1] == kind and kind != EXPANSION:
            self.parts[-1] = (self.parts[-1][0] + piece, kind)
        else:
            self.parts.append((piece, kind))
        if kind == QUOTED:
            self.start_word().quoted = True

    def finish_word(self) -> None:
        word = self.word
        if word is None:
            return
        word.value = "".join(p for p, _ in self.parts)
        word.parts = [p for p in self.parts if p[0]]
        self.parts = []
        if self.awaiting_target is not None:
            self.awaiting_target.target = word
            self.awaiting_target = None
        else:
            self.tokens.append(word)
        self.word = None

    def read_heredocs(self, pos: int) -> int:
        """Consume here-document bodies that start after the newline at pos."""
        text, n = self.text, len(self.text)
        for redirect, strip_tabs in self.pending_heredocs:
            delim = redirect.target.value if redirect.target else ""
            lines: list[str] = []
            while pos < n:
                end = text.find("\n", pos)
                line = text[pos:] if end < 0 else text[pos:end]
                pos = n if end < 0 else end + 1
                check = line.lstrip("\t") if strip_tabs else line
                if check == delim:
                    break
                lines.append(line)
            redirect.heredoc = "\n".join(lines)
        self.pending_heredocs.clear()
        return pos

    def double_quoted(self, i: int) -> int:
        """Read a "..." string whose body starts at i; return the index past it."""
        text, n = self.text, len(self.text)
        w = self.start_word()
        w.quoted = True
        while i < n and text[i] != '"':
            d = text[i]
            if d == "\\" and i + 1 < n:
                if text[i + 1] in '$`"\\':
                    self.add(text[i + 1], QUOTED)
                elif text[i + 1] != "\n":
                    self.add(text[i : i + 2], QUOTED)
                i += 2
                continue
            if d == "$" and text.startswith("$(", i) and not text.startswith("$((", i):
                body, j = _scan_paren(text, i + 2)
                w.subs.append(body)
                self.add(text[i:j], QUOTED)
                i = j
                continue
            if d == "`":
                body, j = _scan_backtick(text, i + 1)
                w.subs.append(body)
                self.add(text[i:j], QUOTED)
                i = j
                continue
            self.add(d, QUOTED)
            i += 1
        return i + 1

    def dollar(self, i: int) -> int:
        """Read what starts with an unquoted '$' at i; return the index past it."""
        text = self.text
        w = self.start_word()
        if text.startswith("$((", i):
            _, j = _scan_paren(text, i + 2)
            self.add(text[i:j], EXPANSION)
        elif text.startswith("$(", i):
            body, j = _scan_paren(text, i + 2)
            w.subs.append(body)
            self.add(text[i:j], EXPANSION)
        elif text.startswith("$'", i):
            decoded, j = _scan_ansi_c(text, i + 2)
            self.add(decoded, QUOTED)
        else:
            j = _param_end(text, i)
            self.add(text[i:j], EXPANSION if j > i + 1 else LITERAL)
        return j

    def run(self) -> list[Token]:
        text, n = self.text, len(self.text)
        i = 0
        while i < n:
            c = text[i]
            if c in " \t\r":
                self.finish_word()
                i += 1
            elif c == "\\":
                if i + 1 < n and text[i + 1] == "\n":
                    i += 2  # line continuation
                    continue
                self.start_word()
                self.add(text[i + 1 : i + 2], QUOTED)
                i += 2
            elif c == "#" and self.word is None:
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif c not in _SPECIAL_CHARS:
                # Fast path: a run of ordinary characters (keeps long input linear and quick).
                self.start_word()
                m = _PLAIN_RUN.match(text, i)
                assert m is not None
                self.add(m.group(), LITERAL)
                i = m.end()
            elif c == "'":
                self.start_word()
                end = text.find("'", i + 1)
                end = n if end < 0 else end
                self.add(text[i + 1 : end], QUOTED)
                i = end + 1
            elif c == '"':
                i = self.double_quoted(i + 1)
            elif c == "`":
                w = self.start_word()
                body, j = _scan_backtick(text, i + 1)
                w.subs.append(body)
                self.add(text[i:j], EXPANSION)
                i = j
            elif c == "$":
                i = self.dollar(i)
            elif c in "<>" and text.startswith("(", i + 1) and self.word is None:
                w = self.start_word()
                body, j = _scan_paren(text, i + 2)
                w.procs.append(body)
                self.add(text[i:j], EXPANSION)
                i = j
            else:
                i = self.operator(i)
        self.finish_word()
        return self.tokens

    def operator(self, i: int) -> int:
        """Read a redirection or control operator at i (or a lone special character)."""
        text = self.text
        m = _REDIR_RE.match(text, i)
        if m is not None:
            redir = m.group()
            # A word of digits (or {var}) right before the operator is its fd.
            joined = "".join(p for p, _ in self.parts)
            fd = None
            if self.word is not None and re.fullmatch(r"\d+|\{\w+\}", joined):
                fd = joined
                self.parts = []
                self.word = None
            self.finish_word()
            redirect = Redirect(redir, fd=fd)
            self.tokens.append(RedirectToken(redirect))
            self.awaiting_target = redirect
            if redir in ("<<", "<<-"):
                self.pending_heredocs.append((redirect, redir == "<<-"))
            return i + len(redir)
        m = _CONTROL_RE.match(text, i)
        if m is not None:
            op = m.group()
            self.finish_word()
            self.awaiting_target = None
            self.tokens.append(Operator(op))
            i += len(op)
            if op == "\n" and self.pending_heredocs:
                i = self.read_heredocs(i)
            return i
        self.start_word()
        self.add(text[i], LITERAL)
        return i + 1


def tokenize(text: str) -> list[Token]:
    """Split shell text into words, control operators and redirections.

    Redirection targets are attached to their :class:`Redirect` (not emitted as
    words) and here-document bodies are read into :attr:`Redirect.heredoc`.
    """
    return _Lexer(text).run()
