"""Hardline blocklist for shell commands.

Every command that ``exec`` or ``process_write`` would hand to a shell passes
:func:`check_hardline` before the permission policy, so no permission mode,
reviewer or human approval can let these through:

* recursive ``rm`` of ``/``, the home directory or a top-level system folder;
* ``mkfs`` and friends, partitioners on a device, ``shred`` on a device;
* ``dd`` or a shell redirect onto a disk device;
* fork bombs;
* a download from a non-loopback host piped into a shell or interpreter
  (also ``bash <(curl ...)`` and ``sh -c "$(curl ...)"``).

This is a guard against a confused or manipulated model, not a sandbox: it
parses the command the way a shell would (quotes, operators, substitutions,
wrappers such as ``sudo`` and ``env``) so that text merely passed as data,
like the argument of ``echo``, is not mistaken for a command.  Anything it
cannot see through (variables, scripts on disk) is left to the permission
policy.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import posixpath
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["check_hardline"]

# Nesting bound for sh -c / eval / substitutions: deeper text is not examined
# further, which only matters for deliberately obfuscated input.
_MAX_DEPTH = 12


# ---------------------------------------------------------------------------
# Lexer and parser: a small subset of POSIX/bash grammar, enough to find the
# simple commands, their words, redirections and substitutions.
# ---------------------------------------------------------------------------


@dataclass
class _Word:
    """One shell word after quote removal; substitutions stay as literal text."""

    value: str
    subs: list[str] = field(default_factory=list)  # $(...) and `...` bodies
    procs: list[str] = field(default_factory=list)  # <(...) and >(...) bodies
    quoted: bool = False

    def inner_texts(self) -> list[str]:
        return self.subs + self.procs


@dataclass
class _Redirect:
    op: str
    target: _Word | None = None
    heredoc: str | None = None


@dataclass
class _Simple:
    words: list[_Word] = field(default_factory=list)
    redirects: list[_Redirect] = field(default_factory=list)


@dataclass
class _Group:
    body: list[list[_Simple | _Group]]


_Element = _Simple | _Group
_Pipeline = list[_Element]

_SEPARATORS = {";", "&", "&&", "||", "\n", ";;", ";&", ";;&"}
_PIPES = {"|", "|&"}
_REDIR_OPS = ("&>>", "<<<", "<<-", "&>", ">>", ">|", ">&", "<<", "<&", "<>", ">", "<")
_CONTROL_OPS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|", "(", ")", "\n")
_OUTPUT_REDIRS = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}
_REDIR_RE = re.compile("|".join(re.escape(op) for op in _REDIR_OPS))
_CONTROL_RE = re.compile("|".join(re.escape(op) for op in _CONTROL_OPS))
_SPECIAL_CHARS = frozenset(" \t\r\n\\'\"`$<>|&;()")
_PLAIN_RUN = re.compile(r"[^ \t\r\n\\'\"`$<>|&;()]+")
# Deeper ( ) and { } nesting is read flat rather than recursed into.
_MAX_GROUP_DEPTH = 64


@dataclass
class _Op:
    value: str


@dataclass
class _RedirTok:
    redirect: _Redirect


_Token = _Word | _Op | _RedirTok


def _scan_paren(text: str, i: int, nesting: int = 0) -> tuple[str, int]:
    """Return the body of a parenthesised region starting just after '(' and the end index."""
    depth = 1
    start = i
    n = len(text)
    if nesting > _MAX_GROUP_DEPTH:
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
            m = re.match(r"x([0-9a-fA-F]{1,2})|([0-7]{1,3})", text[i + 1 :])
            if m:
                out.append(chr(int(m.group(1), 16) if m.group(1) else int(m.group(2), 8)))
                i += 1 + m.end()
                continue
            out.append(nxt)
            i += 2
            continue
        if c == "'":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), n


def _tokenize(text: str) -> list[_Token]:
    """Split shell text into words, control operators and redirections."""
    tokens: list[_Token] = []
    n = len(text)
    i = 0
    buf: list[str] = []
    word: _Word | None = None
    pending_heredocs: list[tuple[_Redirect, bool]] = []
    awaiting_target: _Redirect | None = None

    def start_word() -> _Word:
        nonlocal word
        if word is None:
            word = _Word("")
        return word

    def finish_word() -> None:
        nonlocal word, awaiting_target
        if word is None:
            return
        word.value = "".join(buf)
        buf.clear()
        if awaiting_target is not None:
            awaiting_target.target = word
            awaiting_target = None
        else:
            tokens.append(word)
        word = None

    def read_heredocs(pos: int) -> int:
        """Consume here-document bodies that start after the newline at pos."""
        for redirect, strip_tabs in pending_heredocs:
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
        pending_heredocs.clear()
        return pos

    while i < n:
        c = text[i]
        if c in " \t\r":
            finish_word()
            i += 1
            continue
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2  # line continuation
                continue
            start_word()
            if i + 1 < n:
                buf.append(text[i + 1])
            i += 2
            continue
        if c == "#" and word is None:
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c not in _SPECIAL_CHARS:
            # Fast path: a run of ordinary characters (keeps long input linear and quick).
            start_word()
            m = _PLAIN_RUN.match(text, i)
            assert m is not None
            buf.append(m.group())
            i = m.end()
            continue
        if c == "'":
            w = start_word()
            w.quoted = True
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            buf.append(text[i + 1 : end])
            i = end + 1
            continue
        if c == '"':
            w = start_word()
            w.quoted = True
            i += 1
            while i < n and text[i] != '"':
                d = text[i]
                if d == "\\" and i + 1 < n:
                    if text[i + 1] in '$`"\\':
                        buf.append(text[i + 1])
                    elif text[i + 1] != "\n":
                        buf.append(text[i : i + 2])
                    i += 2
                    continue
                if d == "$" and text.startswith("$(", i) and not text.startswith("$((", i):
                    body, j = _scan_paren(text, i + 2)
                    w.subs.append(body)
                    buf.append(text[i:j])
                    i = j
                    continue
                if d == "`":
                    body, j = _scan_backtick(text, i + 1)
                    w.subs.append(body)
                    buf.append(text[i:j])
                    i = j
                    continue
                buf.append(d)
                i += 1
            i += 1
            continue
        if c == "`":
            w = start_word()
            body, j = _scan_backtick(text, i + 1)
            w.subs.append(body)
            buf.append(text[i:j])
            i = j
            continue
        if c == "$":
            w = start_word()
            if text.startswith("$((", i):
                _, j = _scan_paren(text, i + 2)
                buf.append(text[i:j])
                i = j
            elif text.startswith("$(", i):
                body, j = _scan_paren(text, i + 2)
                w.subs.append(body)
                buf.append(text[i:j])
                i = j
            elif text.startswith("$'", i):
                w.quoted = True
                decoded, j = _scan_ansi_c(text, i + 2)
                buf.append(decoded)
                i = j
            elif text.startswith("${", i):
                end = text.find("}", i)
                end = n if end < 0 else end + 1
                buf.append(text[i:end])
                i = end
            else:
                buf.append(c)
                i += 1
            continue
        if c in "<>" and text.startswith("(", i + 1) and word is None:
            w = start_word()
            body, j = _scan_paren(text, i + 2)
            w.procs.append(body)
            buf.append(text[i:j])
            i = j
            continue
        m = _REDIR_RE.match(text, i)
        redir = m.group() if m else None
        if redir is not None:
            # A word of digits (or {var}) right before the operator is its fd.
            if word is not None and re.fullmatch(r"\d+|\{\w+\}", "".join(buf)):
                buf.clear()
                word = None
            finish_word()
            redirect = _Redirect(redir)
            tokens.append(_RedirTok(redirect))
            awaiting_target = redirect
            if redir in ("<<", "<<-"):
                pending_heredocs.append((redirect, redir == "<<-"))
            i += len(redir)
            continue
        m = _CONTROL_RE.match(text, i)
        op = m.group() if m else None
        if op is not None:
            finish_word()
            awaiting_target = None
            tokens.append(_Op(op))
            i += len(op)
            if op == "\n" and pending_heredocs:
                i = read_heredocs(i)
            continue
        start_word()
        buf.append(c)
        i += 1
    finish_word()
    return tokens


class _Parser:
    """Recursive descent over tokens into pipelines of simple commands and groups."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def parse_list(self, closer: str | None = None) -> list[_Pipeline]:
        pipelines: list[_Pipeline] = []
        while (tok := self.peek()) is not None:
            if isinstance(tok, _Op) and tok.value in _SEPARATORS | _PIPES:
                self.pos += 1
                continue
            if isinstance(tok, _Op) and tok.value == ")":
                self.pos += 1
                if closer == ")":
                    return pipelines
                continue  # stray ')' (e.g. a case pattern)
            if closer == "}" and _is_word(tok, "}"):
                self.pos += 1
                return pipelines
            pipelines.append(self.parse_pipeline(closer))
        return pipelines

    def parse_pipeline(self, closer: str | None) -> _Pipeline:
        elements: _Pipeline = [self.parse_element(closer)]
        while (tok := self.peek()) is not None and isinstance(tok, _Op) and tok.value in _PIPES:
            self.pos += 1
            elements.append(self.parse_element(closer))
        return elements

    def parse_element(self, closer: str | None) -> _Element:
        tok = self.peek()
        opener = ")" if isinstance(tok, _Op) and tok.value == "(" else None
        if tok is not None and _is_word(tok, "{"):
            opener = "}"
        if opener is not None:
            self.pos += 1
            if self.depth >= _MAX_GROUP_DEPTH:
                return _Simple()
            self.depth += 1
            try:
                return _Group(self.parse_list(opener))
            finally:
                self.depth -= 1
        simple = _Simple()
        while (tok := self.peek()) is not None:
            if isinstance(tok, _Op):
                break
            if closer == "}" and not simple.words and _is_word(tok, "}"):
                break
            self.pos += 1
            if isinstance(tok, _RedirTok):
                simple.redirects.append(tok.redirect)
            else:
                simple.words.append(tok)
        return simple


def _is_word(tok: _Token, value: str) -> bool:
    return isinstance(tok, _Word) and not tok.quoted and tok.value == value


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> list[_Pipeline]:
    # Cached: nested sh -c and $(...) text is reparsed by several checks; the result
    # is never mutated after parsing.
    return _Parser(_tokenize(text)).parse_list()


def _simples(element: _Element) -> list[_Simple]:
    """All simple commands inside an element, groups flattened."""
    if isinstance(element, _Simple):
        return [element]
    return [s for pipeline in element.body for e in pipeline for s in _simples(e)]


# ---------------------------------------------------------------------------
# Resolving the command actually run: reserved words, assignments, wrappers.
# ---------------------------------------------------------------------------


def _w(text: str) -> set[str]:
    """A set from whitespace-separated words (keeps option tables compact)."""
    return set(text.split())


_RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "esac"}
_NON_COMMAND_RESERVED = {"for", "select", "case", "function", "in"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")

# wrapper -> options that take a separate argument
_WRAPPERS: dict[str, set[str]] = {
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U", "--user", "--group"},
    "doas": {"-u", "-C"},
    "exec": {"-a"},
    "nice": {"-n", "--adjustment"},
    "nohup": set(),
    "builtin": set(),
    "setsid": set(),
    "time": set(),
    "unbuffer": set(),
    "stdbuf": {"-i", "-o", "-e"},
    "ionice": {"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"},
    "chrt": set(),
    "taskset": set(),
    "busybox": set(),
    "caffeinate": {"-t", "-w"},
    "xargs": _w(
        "-I -n -P -d -L -s -a -E --max-args --max-procs --delimiter --arg-file"
        " --max-lines --max-chars"
    ),
    "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"},
}


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _skip_options(words: list[_Word], i: int, arg_opts: set[str]) -> int:
    """Advance past options (and their separate arguments) starting at index i."""
    while i < len(words):
        v = words[i].value
        if v == "--":
            return i + 1
        if not v.startswith("-") or v == "-":
            return i
        i += 1
        if v in arg_opts and "=" not in v:
            i += 1
    return i


@dataclass
class _Resolved:
    """The command a simple command runs, plus texts that a wrapper would run as shell code."""

    argv: list[_Word]
    extra_code: list[str] = field(default_factory=list)


def _resolve(words: list[_Word]) -> _Resolved | None:
    """Strip reserved words, assignments and wrappers; None when nothing is executed."""
    extra: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        v = w.value
        if not w.quoted and v in _RESERVED:
            i += 1
            continue
        if not w.quoted and v in _NON_COMMAND_RESERVED:
            return None
        if not w.quoted and _ASSIGNMENT.match(v):
            i += 1
            continue
        name = _basename(v)
        if name == "env":
            i += 1
            while i < len(words):
                ev = words[i].value
                if ev == "--":
                    i += 1
                    break
                if ev in ("-u", "--unset", "-C", "--chdir"):
                    i += 2
                elif ev in ("-S", "--split-string") and i + 1 < len(words):
                    extra.append(words[i + 1].value)
                    i += 2
                elif ev.startswith("-S") and len(ev) > 2:
                    extra.append(ev[2:])
                    i += 1
                elif ev.startswith("--split-string="):
                    extra.append(ev.split("=", 1)[1])
                    i += 1
                elif (ev.startswith("-") and ev != "-") or _ASSIGNMENT.match(ev):
                    i += 1
                else:
                    break
            continue
        if name == "command":
            i += 1
            while i < len(words) and words[i].value.startswith("-"):
                if words[i].value in ("-v", "-V"):
                    return None  # lookup only
                if words[i].value == "--":
                    i += 1
                    break
                i += 1
            continue
        if name == "timeout":
            i = _skip_options(words, i + 1, {"-s", "-k", "--signal", "--kill-after"})
            i += 1  # the duration
            continue
        if name in _WRAPPERS:
            i = _skip_options(words, i + 1, _WRAPPERS[name])
            if name in ("nice",) and i < len(words) and re.fullmatch(r"-\d+", words[i].value):
                i += 1
            if name in ("chrt", "taskset") and i < len(words):
                i += 1  # priority / cpu mask
            continue
        break
    if i >= len(words):
        return _Resolved([], extra) if extra else None
    return _Resolved(words[i:], extra)


# ---------------------------------------------------------------------------
# Paths: what a recursive rm must never touch.
# ---------------------------------------------------------------------------

_HOME_SENTINEL = "\x00home"
_TOP_LEVEL = {
    "bin", "boot", "dev", "efi", "etc", "home", "lib", "lib32", "lib64", "libx32",
    "lost+found", "media", "mnt", "nix", "opt", "proc", "root", "run", "sbin", "snap",
    "srv", "sys", "tmp", "usr", "var",
    # macOS
    "Applications", "Library", "System", "Users", "Volumes", "private", "cores",
}  # fmt: skip
_SECOND_LEVEL = {
    "usr/bin", "usr/sbin", "usr/lib", "usr/lib32", "usr/lib64", "usr/libexec",
    "usr/include", "usr/share", "usr/local", "usr/src", "var/lib", "var/log",
    "System/Library", "private/etc", "private/var", "private/tmp",
}  # fmt: skip
# Scratch folders: removing the folder is blocked, emptying it ("/tmp/*") is routine.
_SCRATCH = {"tmp", "private/tmp"}
_GLOB_CHARS = set("*?[")
_PURE_GLOB = re.compile(r"[.*?\[\]!^]*[*?][.*?\[\]!^]*")
_HOME_PREFIX = re.compile(r"(?:~[A-Za-z0-9_.-]*|\$HOME|\$\{HOME\})(?=/|$)")


def _absolute(value: str, cwd: str | None) -> str | None:
    """Absolute form of a path word, home spelled as the sentinel; None if unknowable."""
    m = _HOME_PREFIX.match(value)
    if m:
        path = "/" + _HOME_SENTINEL + value[m.end() :]
    elif value.startswith("/"):
        path = value
    elif cwd is not None and "$" not in value and "`" not in value:
        path = cwd + "/" + value
    else:
        return None
    if "$" in path or "`" in path:
        return None
    path = re.sub(r"/+", "/", path)
    return posixpath.normpath(path) if path != "/" else "/"


def _real_home() -> str | None:
    home = os.path.expanduser("~")
    if not home.startswith("/"):
        return None
    return re.sub(r"/+", "/", home).rstrip("/") or "/"


def _protected(value: str, cwd: str | None) -> bool:
    """Whether removing this path recursively would hit /, a home or a system folder."""
    path = _absolute(value, cwd)
    if path is None:
        return False
    parts = [p for p in path.split("/") if p]
    emptied = False
    while parts and _PURE_GLOB.fullmatch(parts[-1]):
        parts.pop()  # "dir/*" empties dir: as bad as removing it
        emptied = True
    if not parts:
        return True
    if _GLOB_CHARS & set(parts[0]):
        return True  # a glob at the top level can match system folders
    joined = "/".join(parts)
    if joined in _SCRATCH:
        return not emptied
    if len(parts) == 1 and (parts[0] in _TOP_LEVEL or parts[0] == _HOME_SENTINEL):
        return True
    if joined in _SECOND_LEVEL:
        return True
    if len(parts) == 2 and parts[0] in ("home", "Users"):
        return True
    return "/" + joined == _real_home()


def _update_cwd(argv: list[_Word], cwd: str | None) -> str | None:
    """Track `cd` so that `cd / && rm -rf *` is seen for what it is."""
    args = [w.value for w in argv[1:]]
    while args and args[0].startswith("-") and args[0] != "-":
        args.pop(0)
    if not args:
        return "/" + _HOME_SENTINEL
    if args[0] == "-":
        return None
    return _absolute(args[0], cwd)


# ---------------------------------------------------------------------------
# Devices.
# ---------------------------------------------------------------------------

_DISK = re.compile(
    r"/dev/(?:(?:sd|hd|vd|xvd)[a-z]|nvme\d|mmcblk\d|r?disk\d|md\d|dm-\d|loop\d|nbd\d|sr\d"
    r"|mapper/|disk/)"
)
_HARMLESS_DEV = re.compile(
    r"/dev/(?:null|zero|full|u?random|stdin|stdout|stderr|tty|ptmx|fd/.*|pts/.*|shm/.*)"
)


def _norm_dev(value: str) -> str:
    return re.sub(r"/+", "/", value)


def _is_disk(value: str) -> bool:
    return _DISK.match(_norm_dev(value)) is not None


def _is_device(value: str) -> bool:
    path = _norm_dev(value)
    return path.startswith("/dev/") and not _HARMLESS_DEV.fullmatch(path)


_MKFS = re.compile(
    r"mkfs(?:\..+)?|mke2fs|mke4fs|mkswap|wipefs|mkdosfs|mkexfatfs|mkntfs|mkfs_\w+|newfs(?:_\w+)?"
)
_PARTITIONERS = {"fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted", "blkdiscard"}
_PARTITION_READ_ONLY = {
    "fdisk": {"-l", "--list", "-x", "--list-details"},
    "sfdisk": _w(
        "-l --list -d --dump -s --show-size -J --json -V --verify -F --list-free -g --show-geometry"
    ),
    "gdisk": {"-l"},
    "sgdisk": _w("-p --print -i --info -v --verify -O --print-mbr -L --list-types"),
    "parted": {"-l", "--list"},
}
_PARTED_READ_ONLY_WORDS = {"print", "p", "unit", "help", "free", "list", "all", "devices",
                           "s", "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib",
                           "%", "cyl", "chs", "compact"}  # fmt: skip
_DISKUTIL_DESTRUCTIVE = {"erasedisk", "erasevolume", "zerodisk", "randomdisk", "secureerase",
                         "partitiondisk", "reformat"}  # fmt: skip


def _check_partitioner(name: str, args: list[str]) -> str | None:
    devices = [a for a in args if _is_device(a)]
    if not devices:
        return None
    options = {a for a in args if a.startswith("-")}
    read_only = _PARTITION_READ_ONLY.get(name, set())
    if name == "parted":
        # parted takes its commands as words after the device: allow only "print" and kin.
        rest = {a.lower() for a in args if a not in devices and not a.startswith("-")}
        if options & read_only or (rest and rest <= _PARTED_READ_ONLY_WORDS):
            return None
    elif name in ("fdisk", "gdisk"):
        if options & read_only:  # -l lists and exits whatever else is given
            return None
    elif options and options <= read_only:
        return None
    return f"{name} on device {devices[0]} is blocked (it rewrites the disk)"


# ---------------------------------------------------------------------------
# Downloads and interpreters.
# ---------------------------------------------------------------------------

_DOWNLOADERS: dict[str, set[str]] = {
    "curl": {"-o", "--output", "-H", "--header", "-d", "--data", "--data-raw", "--data-binary",
             "--data-urlencode", "-X", "--request", "-u", "--user", "-A", "--user-agent", "-e",
             "--referer", "-x", "--proxy", "-b", "--cookie", "-c", "--cookie-jar", "-F",
             "--form", "-T", "--upload-file", "-w", "--write-out", "-m", "--max-time",
             "--connect-timeout", "--retry", "-r", "--range", "-K", "--config", "-E", "--cert",
             "--key", "--cacert", "--resolve", "--connect-to", "-C", "--continue-at",
             "--retry-delay", "--retry-max-time", "-Y", "-y", "-z", "--output-dir"},
    "wget": {"-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "-P",
             "--directory-prefix", "-U", "--user-agent", "-e", "--execute", "-t", "--tries",
             "-T", "--timeout", "-w", "--wait", "--header", "--user", "--password", "-i",
             "--input-file", "-Q", "--quota", "--referer", "--post-data", "--body-data"},
    "wget2": {"-O", "--output-document", "-o", "--output-file", "-P", "-U", "--header", "-e"},
    "fetch": {"-o", "-T", "-N", "-S"},
    "http": {"-a", "--auth", "-o", "--output", "--session"},
    "https": {"-a", "--auth", "-o", "--output", "--session"},
    "xh": {"-a", "--auth", "-o", "--output", "--session"},
    "aria2c": {"-o", "--out", "-d", "--dir"},
    "lwp-request": {"-m", "-c", "-H"},
    "GET": {"-m", "-c", "-H"},
}  # fmt: skip
_URL_LONG_OPTS = {"--url"}
_HOSTLIKE = re.compile(
    r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+|localhost)(:\d+)?(/.*)?"
)


def _is_loopback_host(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def _url_host(value: str) -> str | None:
    """Host of a URL-ish downloader argument, or None when it does not look like one."""
    if "://" in value:
        try:
            host = urlsplit(value).hostname
        except ValueError:
            return value
        return host or value
    m = _HOSTLIKE.fullmatch(value)
    return m.group(1) if m else None


def _download_target(argv: list[_Word]) -> str | None:
    """For a downloader invocation, a description of the non-loopback source, else None."""
    name = _basename(argv[0].value)
    arg_opts = _DOWNLOADERS.get(name)
    if arg_opts is None:
        return None
    hosts: list[str] = []
    opaque: list[str] = []
    args = [w.value for w in argv[1:]]
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a in _URL_LONG_OPTS and i < len(args):
            a = args[i]
            i += 1
        elif a.startswith("--url="):
            a = a.split("=", 1)[1]
        elif a.startswith("-") and a != "-":
            if a in arg_opts:
                i += 1
            continue
        host = _url_host(a)
        if host is not None:
            hosts.append(host)
        elif "$" in a or "`" in a:
            opaque.append(a)
    remote = [h for h in hosts if not _is_loopback_host(h)]
    if remote:
        return f"{name} from {remote[0]}"
    if hosts and not opaque:
        return None
    # No URL we can read (e.g. "$URL"): the host cannot be shown to be loopback.
    return f"{name} from an unverifiable host"


@functools.lru_cache(maxsize=256)
def _text_download(text: str, depth: int) -> str | None:
    """A non-loopback download anywhere in the command text (including nested substitutions)."""
    if depth > _MAX_DEPTH:
        return None
    for pipeline in _parse(text):
        for element in pipeline:
            found = _element_download(element, depth)
            if found:
                return found
    return None


def _element_download(element: _Element, depth: int) -> str | None:
    for simple in _simples(element):
        resolved = _resolve(simple.words)
        if resolved is not None:
            for code in resolved.extra_code:
                found = _text_download(code, depth + 1)
                if found:
                    return found
            if resolved.argv:
                found = _download_target(resolved.argv)
                if found:
                    return found
                shell_code = _shell_code(resolved.argv)
                if shell_code is not None:
                    found = _text_download(shell_code.value, depth + 1)
                    if found:
                        return found
        for w in simple.words:
            for inner in w.subs:
                found = _text_download(inner, depth + 1)
                if found:
                    return found
    return None


_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh",
           "rbash", "posh", "oksh", "loksh", "pdksh"}  # fmt: skip


@dataclass
class _Interp:
    code_opts: set[str]  # option whose argument is program text
    arg_opts: set[str]  # other options taking an argument
    module_opts: set[str] = field(default_factory=set)  # run a module: not stdin
    ignore_case: bool = False  # PowerShell options are case-insensitive


_INTERPRETERS: list[tuple[re.Pattern[str], _Interp]] = [
    (re.compile(r"(?:python|pypy)[\d.]*"), _Interp({"-c"}, {"-W", "-X", "-Q"}, {"-m"})),
    (re.compile(r"perl[\d.]*"), _Interp({"-e", "-E"}, {"-I", "-M", "-m", "-x"})),
    (re.compile(r"ruby[\d.]*|jruby|irb"), _Interp({"-e"}, {"-I", "-r", "-C", "-E"})),
    (
        re.compile(r"node(?:js)?|bun"),
        _Interp({"-e", "--eval", "-p", "--print"}, {"-r", "--require", "--import", "--loader"}),
    ),
    (re.compile(r"php[\d.]*"), _Interp({"-r"}, {"-c", "-d", "-B", "-R", "-E", "-F"}, {"-f"})),
    (re.compile(r"lua[\d.]*|luajit"), _Interp({"-e"}, {"-l"})),
    (
        re.compile(r"pwsh|powershell(?:\.exe)?"),
        _Interp({"-c", "-command"}, {"-file"}, ignore_case=True),
    ),
    (re.compile(r"tclsh[\d.]*|wish"), _Interp(set(), set())),
    (re.compile(r"R|Rscript"), _Interp({"-e"}, set())),
]


@dataclass
class _Invocation:
    """How an interpreter invocation gets its program."""

    code: _Word | None  # program text given as an argument
    script: _Word | None  # first operand (script file)
    reads_stdin: bool


@functools.lru_cache(maxsize=256)
def _interp_for(name: str) -> _Interp | None:
    if name in _SHELLS:
        return None
    for pattern, spec in _INTERPRETERS:
        if pattern.fullmatch(name):
            return spec
    return None


def _is_interpreter(name: str) -> bool:
    return name in _SHELLS or _interp_for(name) is not None or name in ("eval", "source", ".")


def _shell_invocation(args: list[_Word]) -> _Invocation:
    dash_c = dash_s = False
    i = 0
    while i < len(args):
        v = args[i].value
        if v in ("--", "-"):
            i += 1 if v == "--" else 0
            break
        if v in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if v.startswith("--"):
            i += 1
            continue
        if len(v) > 1 and v[0] in "-+":
            if v[0] == "-" and "c" in v[1:]:
                dash_c = True
            if v[0] == "-" and "s" in v[1:]:
                dash_s = True
            i += 1
            continue
        break
    operand = args[i] if i < len(args) else None
    if dash_c:
        return _Invocation(operand, None, False)
    script = None if dash_s else operand
    reads_stdin = dash_s or operand is None or operand.value == "-"
    return _Invocation(None, script, reads_stdin)


def _generic_invocation(spec: _Interp, args: list[_Word]) -> _Invocation:
    i = 0
    while i < len(args):
        w = args[i]
        v = w.value
        low = v.lower() if spec.ignore_case else v
        if v == "--":
            i += 1
            break
        if v == "-" or not v.startswith("-"):
            break
        i += 1
        if low.startswith("--"):
            key = low.split("=", 1)[0]
            if key in spec.code_opts:
                code = _Word(v.split("=", 1)[1], w.subs, w.procs, w.quoted) if "=" in v else None
                if code is None and i < len(args):
                    code = args[i]
                return _Invocation(code, None, False)
            if key in spec.module_opts:
                return _Invocation(None, None, False)
            if key in spec.arg_opts and "=" not in v:
                i += 1
            continue
        if low in spec.code_opts:
            return _Invocation(args[i] if i < len(args) else None, None, False)
        if low in spec.module_opts or low in spec.arg_opts:
            if low in spec.module_opts:
                return _Invocation(None, None, False)
            i += 1
            continue
        # A cluster such as -ne or -uc: the first code flag takes the rest or the next word.
        for k, ch in enumerate(v[1:], start=1):
            flag = "-" + ch
            if flag in spec.code_opts:
                rest = v[k + 1 :]
                if rest:
                    return _Invocation(_Word(rest, w.subs, w.procs, w.quoted), None, False)
                return _Invocation(args[i] if i < len(args) else None, None, False)
            if flag in spec.module_opts:
                return _Invocation(None, None, False)
            if flag in spec.arg_opts:
                if not v[k + 1 :]:
                    i += 1
                break
    operand = args[i] if i < len(args) else None
    reads_stdin = operand is None or operand.value == "-"
    return _Invocation(None, operand, reads_stdin)


def _invocation(argv: list[_Word]) -> _Invocation | None:
    """How the program of a shell/interpreter command is supplied; None if not one."""
    name = _basename(argv[0].value)
    if name in _SHELLS:
        return _shell_invocation(argv[1:])
    spec = _interp_for(name)
    if spec is not None:
        return _generic_invocation(spec, argv[1:])
    if name in ("source", "."):
        return _Invocation(None, argv[1] if len(argv) > 1 else None, False)
    if name == "eval":
        joined = " ".join(w.value for w in argv[1:])
        subs = [s for w in argv[1:] for s in w.subs]
        procs = [p for w in argv[1:] for p in w.procs]
        return _Invocation(_Word(joined, subs, procs), None, False)
    return None


def _shell_code(argv: list[_Word]) -> _Word | None:
    """The shell code a command runs from its arguments (sh -c, eval, su -c, watch)."""
    name = _basename(argv[0].value)
    if name in _SHELLS or name == "eval":
        inv = _invocation(argv)
        return inv.code if inv else None
    if name == "su":
        for k, w in enumerate(argv[1:-1], start=1):
            if w.value in ("-c", "--command"):
                return argv[k + 1]
        for w in argv[1:]:
            if w.value.startswith("--command="):
                return _Word(w.value.split("=", 1)[1], w.subs, w.procs)
        return None
    if name == "watch":
        rest = argv[1 + _skip_options_count(argv[1:], {"-n", "--interval", "-d"}) :]
        if any(w.value in ("-x", "--exec") for w in argv[1:]):
            return None
        return _Word(" ".join(w.value for w in rest)) if rest else None
    return None


def _skip_options_count(words: list[_Word], arg_opts: set[str]) -> int:
    return _skip_options(words, 0, arg_opts)


def _stdin_download(simple: _Simple, depth: int) -> str | None:
    """A download fed to the command's stdin by redirection (`bash < <(curl ..)`, `<<<`)."""
    for r in simple.redirects:
        if r.op in ("<", "<<<") and r.target is not None:
            for inner in r.target.inner_texts():
                found = _text_download(inner, depth + 1)
                if found:
                    return found
    return None


def _word_download(word: _Word | None, depth: int) -> str | None:
    if word is None:
        return None
    for inner in word.inner_texts():
        found = _text_download(inner, depth + 1)
        if found:
            return found
    return None


# ---------------------------------------------------------------------------
# Checks.
# ---------------------------------------------------------------------------

_FUNC_NAME = r"[^\s(){}<>;|&'\"`$=]+"
_FUNC_DEF = re.compile(
    # The name must start at a boundary, or a long word would cost quadratic time.
    rf"(?:\bfunction\s+)?(?<![^\s;&|(){{}}])(?P<a>{_FUNC_NAME})\s*\(\s*\)\s*\{{(?P<ba>[^{{}}]*)\}}"
    rf"|\bfunction\s+(?P<b>{_FUNC_NAME})\s*\{{(?P<bb>[^{{}}]*)\}}"
)
_QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")
_BEFORE = r"(?<![^\s;&|({])"
_AFTER = r"(?![^\s;&|)}])"


def _fork_bomb(text: str) -> str | None:
    """A function that pipes or backgrounds itself twice, e.g. :(){ :|:& };:"""
    unquoted = _QUOTED.sub("''", text)
    if re.search(r"%0\s*\|\s*%0", unquoted):
        return "fork bomb (%0|%0) is blocked"
    for m in _FUNC_DEF.finditer(unquoted):
        name = m.group("a") or m.group("b")
        body = m.group("ba") if m.group("a") else m.group("bb")
        n = re.escape(name)
        self_pipe = re.search(rf"{_BEFORE}{n}{_AFTER}\s*\|&?\s*{n}{_AFTER}", body)
        self_bg = re.findall(rf"{_BEFORE}{n}{_AFTER}\s*&(?!&)", body)
        if self_pipe or len(self_bg) >= 2:
            return f"fork bomb (function {name!r} spawning itself) is blocked"
    return None


@dataclass
class _State:
    cwd: str | None = None


def _check_rm(args: list[_Word], state: _State) -> str | None:
    recursive = False
    operands: list[str] = []
    end_of_options = False
    for w in args:
        v = w.value
        if not end_of_options and v == "--":
            end_of_options = True
        elif not end_of_options and v.startswith("--") and len(v) > 2:
            if "recursive".startswith(v[2:]):
                recursive = True
        elif not end_of_options and v.startswith("-") and len(v) > 1:
            if "r" in v or "R" in v:
                recursive = True
        else:
            operands.append(v)
    if not recursive:
        return None
    for v in operands:
        if _protected(v, state.cwd):
            return f"recursive rm of {v!r} (root, home or a system folder) is blocked"
    return None


def _check_argv(argv: list[_Word], simple: _Simple, state: _State, depth: int) -> str | None:
    name = _basename(argv[0].value)
    args = argv[1:]
    values = [w.value for w in args]
    if name in ("cd", "pushd"):
        state.cwd = _update_cwd(argv, state.cwd)
        return None
    if name == "popd":
        state.cwd = None
        return None
    if name == "rm":
        return _check_rm(args, state)
    if _MKFS.fullmatch(name):
        return f"{name} is blocked (it destroys a filesystem)"
    if name in _PARTITIONERS:
        return _check_partitioner(name, values)
    if name == "shred":
        dev = next((v for v in values if _is_device(v)), None)
        return f"shred on device {dev} is blocked" if dev else None
    if name == "dd":
        for v in values:
            if v.startswith("of=") and _is_disk(v[3:]):
                return f"dd onto disk device {v[3:]} is blocked"
        return None
    if name == "tee":
        dev = next((v for v in values if _is_disk(v)), None)
        return f"tee onto disk device {dev} is blocked" if dev else None
    if name == "diskutil" and values and values[0].lower() in _DISKUTIL_DESTRUCTIVE:
        return f"diskutil {values[0]} is blocked"

    code = _shell_code(argv)
    if code is not None:
        reason = _check_text(code.value, depth + 1)
        if reason:
            return reason
    inv = _invocation(argv)
    if inv is not None:
        found = (
            _word_download(inv.code, depth)
            or _word_download(inv.script, depth)
            or (_stdin_download(simple, depth) if inv.reads_stdin else None)
        )
        if found:
            return f"running a download ({found}) with {name} is blocked"
        if name in _SHELLS and inv.reads_stdin:
            for r in simple.redirects:
                body = r.heredoc if r.op in ("<<", "<<-") else None
                if r.op == "<<<" and r.target is not None:
                    body = r.target.value
                if body:
                    reason = _check_text(body, depth + 1)
                    if reason:
                        return reason
    return None


def _reads_program_from_stdin(element: _Element) -> str | None:
    """Name of a shell/interpreter in the element that takes its program from stdin."""
    for simple in _simples(element):
        resolved = _resolve(simple.words)
        if resolved is None or not resolved.argv:
            continue
        name = _basename(resolved.argv[0].value)
        if not _is_interpreter(name) or name in ("eval", "source", "."):
            continue
        inv = _invocation(resolved.argv)
        if inv is not None and inv.reads_stdin:
            has_stdin_redirect = any(r.op in ("<", "<<", "<<-", "<<<") for r in simple.redirects)
            if not has_stdin_redirect:
                return name
    return None


def _printed_text(element: _Element) -> str | None:
    """Text that `echo`/`printf`/`cat <<EOF` writes, for when it is piped into a shell."""
    if not isinstance(element, _Simple):
        return None
    resolved = _resolve(element.words)
    if resolved is None or not resolved.argv:
        return None
    name = _basename(resolved.argv[0].value)
    args = [w.value for w in resolved.argv[1:]]
    if name == "cat" and not args:
        for r in element.redirects:
            if r.op in ("<<", "<<-") and r.heredoc:
                return r.heredoc
            if r.op == "<<<" and r.target is not None:
                return r.target.value
        return None
    if name == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args.pop(0)
    elif name != "printf":
        return None
    return " ".join(args).replace("\\n", "\n")


def _check_simple(simple: _Simple, state: _State, depth: int) -> str | None:
    # Substitutions run whatever the outer command is.
    for w in simple.words:
        for inner in w.inner_texts():
            reason = _check_text(inner, depth + 1)
            if reason:
                return reason
    for r in simple.redirects:
        if r.target is None:
            continue
        for inner in r.target.inner_texts():
            reason = _check_text(inner, depth + 1)
            if reason:
                return reason
        if r.op in _OUTPUT_REDIRS and _is_disk(r.target.value):
            return f"redirect onto disk device {r.target.value} is blocked"
    resolved = _resolve(simple.words)
    if resolved is None:
        return None
    for code in resolved.extra_code:
        reason = _check_text(code, depth + 1)
        if reason:
            return reason
    if not resolved.argv:
        return None
    return _check_argv(resolved.argv, simple, state, depth)


def _check_pipelines(pipelines: list[_Pipeline], state: _State, depth: int) -> str | None:
    for pipeline in pipelines:
        # sinks[k]: a later element that runs its stdin as a program (computed once: O(n)).
        sinks: list[str | None] = [None] * len(pipeline)
        for k in range(len(pipeline) - 2, -1, -1):
            sinks[k] = _reads_program_from_stdin(pipeline[k + 1]) or sinks[k + 1]
        for k, element in enumerate(pipeline[:-1]):
            sink = sinks[k]
            if sink is None:
                continue
            source = _element_download(element, depth)
            if source is not None:
                return f"piping a download ({source}) into {sink} is blocked"
            printed = _printed_text(element)
            if printed is not None:
                reason = _check_text(printed, depth + 1)
                if reason:
                    return reason
        for element in pipeline:
            if isinstance(element, _Group):
                reason = _check_pipelines(element.body, state, depth)
            else:
                reason = _check_simple(element, state, depth)
            if reason:
                return reason
    return None


@functools.lru_cache(maxsize=256)
def _check_text(text: str, depth: int) -> str | None:
    if depth > _MAX_DEPTH or not text.strip():
        return None
    reason = _fork_bomb(text)
    if reason:
        return reason
    return _check_pipelines(_parse(text), _State(), depth)


def check_hardline(command: str) -> str | None:
    """Return a one-line reason when ``command`` is on the hardline blocklist, else None.

    ``command`` is shell text as it would be passed to ``sh -c``. The check is
    deliberately conservative about what counts as a command (text given to
    ``echo`` is data) and aims for no false positives on everyday commands.
    """
    global _cached_home
    home = _real_home()
    if home != _cached_home:
        # Verdicts depend on the home directory; drop those made for another one.
        _check_text.cache_clear()
        _cached_home = home
    return _check_text(command, 0)


_cached_home: str | None = None
