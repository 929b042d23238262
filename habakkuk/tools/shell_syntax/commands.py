"""What a simple command actually runs: reserved words, assignments and wrappers peeled off.

``sudo -u root env FOO=1 nice -n 5 /bin/rm -rf x`` runs ``/bin/rm -rf x``;
:func:`resolve` finds that argv, plus any text a wrapper runs as shell code
(``env -S '...'``) and whether the program takes its arguments from stdin
(``xargs``). :func:`invocation` and :func:`shell_code` say how a shell or an
interpreter gets its program: ``sh -c TEXT``, a script file, or stdin.

Pass words through :func:`habakkuk.tools.shell_syntax.expand.expand_words`
first so that brace expansion and ``$IFS`` splitting are seen as a shell sees them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from habakkuk.tools.shell_syntax.lexer import LITERAL, Word

__all__ = [
    "SHELLS",
    "STDIN_PATHS",
    "Interpreter",
    "Invocation",
    "Resolved",
    "XargsInput",
    "basename",
    "invocation",
    "is_assignment",
    "is_interpreter",
    "resolve",
    "shell_code",
    "skip_options",
]


def _w(text: str) -> frozenset[str]:
    """A set from whitespace-separated words (keeps option tables compact)."""
    return frozenset(text.split())


RESERVED = _w("if then else elif fi do done while until ! esac")
NON_COMMAND_RESERVED = _w("for select case function in")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")

SHELLS = _w("sh bash zsh dash ksh mksh ash yash fish csh tcsh rbash posh oksh loksh pdksh")
# A script operand naming the process's own stdin.
STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})

# wrapper -> options that take a separate argument; the command follows the options.
WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": _w(
        "-u -g -h -p -C -D -r -t -T -U -R --user --group --host --prompt --chdir --role --type"
        " --close-from --command-timeout --other-user --chroot"
    ),
    "doas": _w("-u -C"),
    "run0": _w("-u --user -g --group -D --chdir --description --slice --unit --property --nice"),
    "pkexec": _w("--user"),
    "exec": _w("-a"),
    "nice": _w("-n --adjustment"),
    "nohup": frozenset(),
    "time": _w("-f --format -o --output"),
    "builtin": frozenset(),
    "setsid": frozenset(),
    "unbuffer": frozenset(),
    "stdbuf": _w("-i -o -e"),
    "ionice": _w("-c -n -p -P -u --class --classdata"),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "busybox": frozenset(),
    "toybox": frozenset(),
    "caffeinate": _w("-t -w"),
    "xargs": _w(
        "-I -n -P -d -L -s -a -E --max-args --max-procs --delimiter --arg-file"
        " --max-lines --max-chars"
    ),
    "parallel": _w("-j --jobs -S --sshlogin --joblog -a --arg-file --delay --timeout"),
    "flock": _w("-w -E --timeout --conflict-exit-code"),
    "unshare": _w(
        "-S --setuid -G --setgid -R --root -w --wd --propagation --setgroups --map-user"
        " --map-group --map-users --map-groups"
    ),
    "nsenter": _w("-t --target -S --setuid -G --setgid"),
    "chroot": frozenset(),
    "setpriv": _w(
        "--ruid --euid --reuid --rgid --egid --regid --groups --inh-caps --ambient-caps"
        " --bounding-set --securebits --pdeathsig --selinux-label --apparmor-profile"
    ),
    "systemd-run": _w(
        "-u --unit -p --property --description --slice -H --host -M --machine --uid --gid"
        " --nice -E --setenv --working-directory --on-active --on-boot --on-startup"
        " --on-unit-active --on-unit-inactive --on-calendar --timer-property"
    ),
    "fakeroot": _w("-l --lib -s -i -b --faked"),
    "fakechroot": _w("-l --lib -c --config-dir -e --environment -s --use-system-libs"),
    "proot": _w("-r --rootfs -b --bind -m --mount -w --pwd --cwd -q --qemu -k --kernel-release"),
    "firejail": frozenset(),
    "strace": _w("-o -e -p -s -u -E -a -b -I -O -S -X -P"),
    "ltrace": _w("-o -e -p -s -u -a -n -l"),
    "eatmydata": frozenset(),
    "nocache": frozenset(),
    "chronic": frozenset(),
    "torsocks": _w("-u -p -a -P"),
    "proxychains": _w("-f"),
    "proxychains4": _w("-f"),
    "catchsegv": frozenset(),
    "dbus-run-session": frozenset(),
    "dumb-init": frozenset(),
    "xvfb-run": _w("-n --server-num -s --server-args -e --error-file -f --auth-file"),
    "cgexec": _w("-g"),
    "numactl": _w("-C -N -m -p -i -P --physcpubind --cpunodebind --membind --preferred"),
    "ssh-agent": _w("-a -E -t -P"),
}
# Tools whose "run" subcommand runs any command on PATH: (tool, subcommand) -> argument options.
RUNNERS: dict[tuple[str, str], frozenset[str]] = {
    ("uv", "run"): _w("--with -p --python --project --directory --env-file --extra --group"),
    ("poetry", "run"): _w("-C --directory -P --project"),
    ("pipenv", "run"): frozenset(),
    ("pdm", "run"): _w("-p --project"),
    ("hatch", "run"): frozenset(),
    ("pixi", "run"): _w("-e --environment --manifest-path"),
    ("bundle", "exec"): frozenset(),
    ("conda", "run"): _w("-n --name -p --prefix --cwd"),
    ("mamba", "run"): _w("-n --name -p --prefix --cwd"),
    ("micromamba", "run"): _w("-n --name -p --prefix --cwd"),
    ("mise", "exec"): _w("-C --cd"),
}
# sudo/doas/run0 flags that run a shell when no command follows (which then reads stdin).
_SHELL_FLAGS = {"-s", "-i", "--shell", "--login"}
_ENV_ARG_OPTS = {"-u", "--unset", "-C", "--chdir"}


def basename(word: str) -> str:
    """The program name of a command word (``/usr/bin/rm`` -> ``rm``)."""
    return word.rsplit("/", 1)[-1]


def is_assignment(word: Word) -> bool:
    """Whether the word is a variable assignment (``NAME=value``, the name unquoted)."""
    head = word.parts[0] if word.parts else ("", LITERAL)
    return head[1] == LITERAL and _ASSIGNMENT.match(head[0]) is not None


def skip_options(words: list[Word], i: int, arg_opts: frozenset[str] | set[str]) -> int:
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
class XargsInput:
    """The command takes (more) arguments from its stdin, as ``xargs`` gives them."""

    replace: str | None = None  # -I STR / -i: each input item replaces STR instead of appending
    via: str = "xargs"  # the program that builds the commands: xargs or parallel


@dataclass
class Resolved:
    """The command a simple command runs, plus texts that a wrapper would run as shell code."""

    argv: list[Word]
    extra_code: list[str] = field(default_factory=list)
    xargs: XargsInput | None = None


def _xargs_input(words: list[Word], start: int, end: int, via: str) -> XargsInput:
    replace: str | None = None
    for k in range(start, end):
        v = words[k].value
        if v == "-I" and k + 1 < end:
            replace = words[k + 1].value
        elif v.startswith("-I") and len(v) > 2:
            replace = v[2:]
        elif v in ("-i", "--replace"):
            replace = "{}"
        elif v.startswith("--replace="):
            replace = v.split("=", 1)[1]
    return XargsInput(replace, via)


def _skip_env(words: list[Word], i: int, extra: list[str]) -> int:
    """Skip `env`'s options and assignments from i; `-S TEXT` is shell-like code."""
    while i < len(words):
        ev = words[i].value
        if ev == "--":
            return i + 1
        if ev in _ENV_ARG_OPTS:
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
            return i
    return i


def resolve(words: list[Word]) -> Resolved | None:
    """Strip reserved words, assignments and wrappers; None when nothing is executed.

    A wrapper that starts a shell with no command (``sudo -s``, ``chroot /``)
    resolves to a synthetic ``sh`` that reads its program from stdin.
    """
    extra: list[str] = []
    xargs: XargsInput | None = None
    i = 0
    while i < len(words):
        w = words[i]
        v = w.value
        if not w.quoted and v in RESERVED:
            i += 1
            continue
        if not w.quoted and v in NON_COMMAND_RESERVED:
            return None
        if is_assignment(w):
            i += 1
            continue
        name = basename(v)
        if name == "env":
            i = _skip_env(words, i + 1, extra)
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
            i = skip_options(words, i + 1, {"-s", "-k", "--signal", "--kill-after"})
            i += 1  # the duration
            continue
        runner = RUNNERS.get((name, words[i + 1].value if i + 1 < len(words) else ""))
        if runner is not None:
            i = skip_options(words, i + 2, runner)
            continue
        if name == "flock":
            # flock [options] FILE|FD (COMMAND... | -c TEXT)
            i = skip_options(words, i + 1, WRAPPERS["flock"])
            if i < len(words) and not words[i].value.isdigit():
                i += 1  # the lock file
            if i + 1 < len(words) and words[i].value in ("-c", "--command"):
                extra.append(words[i + 1].value)
                i = len(words)
            continue
        if name in WRAPPERS:
            start = i + 1
            i = skip_options(words, start, WRAPPERS[name])
            flags = {words[k].value for k in range(start, i)}
            if name in ("xargs", "parallel"):
                xargs = _xargs_input(words, start, i, name)
            if name == "nice" and i < len(words) and re.fullmatch(r"-\d+", words[i].value):
                i += 1
            if name in ("chrt", "taskset", "chroot") and i < len(words):
                i += 1  # priority / cpu mask / new root
                if name == "chroot" and i >= len(words):
                    return Resolved([Word("sh")], extra)  # chroot DIR runs an interactive shell
            if name in ("sudo", "doas", "run0") and i >= len(words) and flags & _SHELL_FLAGS:
                return Resolved([Word("sh")], extra)
            if name == "parallel" and (i >= len(words) or words[i].value == ":::"):
                # With no command, parallel runs each input as a shell command line.
                if i >= len(words):
                    line = XargsInput("{}", "parallel")
                    return Resolved([Word("sh"), Word("-c"), Word("{}")], extra, line)
                return Resolved([], extra + [w.value for w in words[i + 1 :]])
            continue
        break
    if i >= len(words):
        return Resolved([], extra) if extra else None
    argv = words[i:]
    if any(w.value == ":::" for w in argv):
        return Resolved(_parallel_inputs(argv), extra)  # inputs given, stdin not read
    return Resolved(argv, extra, xargs)


def _parallel_inputs(argv: list[Word]) -> list[Word]:
    """`parallel CMD ::: A B` runs CMD with each input; keep CMD and the inputs as its args."""
    values = [w.value for w in argv]
    if ":::" not in values:
        return argv
    k = values.index(":::")
    return argv[:k] + [w for w in argv[k + 1 :] if not w.value.startswith(":::")]


# ---------------------------------------------------------------------------
# Shells and interpreters: where the program comes from.
# ---------------------------------------------------------------------------


@dataclass
class Interpreter:
    """Command-line conventions of an interpreter."""

    code_opts: set[str]  # option whose argument is program text
    arg_opts: set[str]  # other options taking an argument
    module_opts: set[str] = field(default_factory=set)  # run a module: not stdin
    ignore_case: bool = False  # PowerShell options are case-insensitive


INTERPRETERS: list[tuple[re.Pattern[str], Interpreter]] = [
    (re.compile(r"(?:python|pypy)[\d.]*"), Interpreter({"-c"}, {"-W", "-X", "-Q"}, {"-m"})),
    (re.compile(r"perl[\d.]*"), Interpreter({"-e", "-E"}, {"-I", "-M", "-m", "-x"})),
    (re.compile(r"ruby[\d.]*|jruby|irb"), Interpreter({"-e"}, {"-I", "-r", "-C", "-E"})),
    (
        re.compile(r"node(?:js)?|bun"),
        Interpreter({"-e", "--eval", "-p", "--print"}, {"-r", "--require", "--import", "--loader"}),
    ),
    (re.compile(r"php[\d.]*"), Interpreter({"-r"}, {"-c", "-d", "-B", "-R", "-E", "-F"}, {"-f"})),
    (re.compile(r"lua[\d.]*|luajit"), Interpreter({"-e"}, {"-l"})),
    (
        re.compile(r"pwsh|powershell(?:\.exe)?"),
        Interpreter({"-c", "-command"}, {"-file"}, ignore_case=True),
    ),
    (re.compile(r"tclsh[\d.]*|wish"), Interpreter(set(), set())),
    (re.compile(r"R|Rscript"), Interpreter({"-e"}, set())),
    (re.compile(r"osascript"), Interpreter({"-e"}, {"-l", "-s"})),
]


@dataclass
class Invocation:
    """How an interpreter invocation gets its program."""

    code: Word | None  # program text given as an argument
    script: Word | None  # first operand (script file)
    reads_stdin: bool


@functools.lru_cache(maxsize=256)
def _interpreter_for(name: str) -> Interpreter | None:
    if name in SHELLS:
        return None
    for pattern, spec in INTERPRETERS:
        if pattern.fullmatch(name):
            return spec
    return None


def is_interpreter(name: str) -> bool:
    """Whether the program runs code (a shell, an interpreter, eval/source or su)."""
    return (
        name in SHELLS
        or _interpreter_for(name) is not None
        or name in ("eval", "source", ".", "su", "runuser")
    )


def _shell_invocation(args: list[Word]) -> Invocation:
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
        return Invocation(operand, None, False)
    script = None if dash_s else operand
    reads_stdin = dash_s or operand is None or operand.value in STDIN_PATHS
    return Invocation(None, script, reads_stdin)


def _generic_invocation(spec: Interpreter, args: list[Word]) -> Invocation:
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
                code = Word(v.split("=", 1)[1], w.subs, w.procs, w.quoted) if "=" in v else None
                if code is None and i < len(args):
                    code = args[i]
                return Invocation(code, None, False)
            if key in spec.module_opts:
                return Invocation(None, None, False)
            if key in spec.arg_opts and "=" not in v:
                i += 1
            continue
        if low in spec.code_opts:
            return Invocation(args[i] if i < len(args) else None, None, False)
        if low in spec.module_opts or low in spec.arg_opts:
            if low in spec.module_opts:
                return Invocation(None, None, False)
            i += 1
            continue
        # A cluster such as -ne or -uc: the first code flag takes the rest or the next word.
        for k, ch in enumerate(v[1:], start=1):
            flag = "-" + ch
            if flag in spec.code_opts:
                rest = v[k + 1 :]
                if rest:
                    return Invocation(Word(rest, w.subs, w.procs, w.quoted), None, False)
                return Invocation(args[i] if i < len(args) else None, None, False)
            if flag in spec.module_opts:
                return Invocation(None, None, False)
            if flag in spec.arg_opts:
                if not v[k + 1 :]:
                    i += 1
                break
    operand = args[i] if i < len(args) else None
    reads_stdin = operand is None or operand.value in STDIN_PATHS
    return Invocation(None, operand, reads_stdin)


def _su_code(argv: list[Word]) -> Word | None:
    for k, w in enumerate(argv[1:-1], start=1):
        if w.value in ("-c", "--command", "--session-command"):
            return argv[k + 1]
    for w in argv[1:]:
        if w.value.startswith(("--command=", "--session-command=")):
            return Word(w.value.split("=", 1)[1], w.subs, w.procs)
    return None


def invocation(argv: list[Word]) -> Invocation | None:
    """How the program of a shell/interpreter command is supplied; None if not one."""
    name = basename(argv[0].value)
    if name in SHELLS:
        return _shell_invocation(argv[1:])
    spec = _interpreter_for(name)
    if spec is not None:
        return _generic_invocation(spec, argv[1:])
    if name in ("source", "."):
        operand = argv[1] if len(argv) > 1 else None
        return Invocation(None, operand, operand is not None and operand.value in STDIN_PATHS)
    if name == "eval":
        joined = " ".join(w.value for w in argv[1:])
        subs = [s for w in argv[1:] for s in w.subs]
        procs = [p for w in argv[1:] for p in w.procs]
        return Invocation(Word(joined, subs, procs), None, False)
    if name in ("su", "runuser"):
        # Without -c, su starts the user's shell, which reads its commands from stdin.
        code = _su_code(argv)
        return Invocation(code, None, code is None)
    return None


def shell_code(argv: list[Word]) -> Word | None:
    """The shell code a command runs from its arguments (sh -c, eval, su -c, watch, ...)."""
    name = basename(argv[0].value)
    if name in SHELLS or name == "eval":
        inv = invocation(argv)
        return inv.code if inv else None
    if name in ("su", "runuser", "sg"):
        return _su_code(argv)
    if name == "script":
        # script -c CMD [file] (also -qc CMD, --command=CMD): CMD is run by sh -c.
        for k, w in enumerate(argv[1:], start=1):
            v = w.value
            if v.startswith("--command="):
                return Word(v.split("=", 1)[1], w.subs, w.procs)
            if k + 1 < len(argv) and (v == "--command" or re.fullmatch(r"-[a-zA-Z]*c", v)):
                return argv[k + 1]
        return None
    if name == "nix-shell":
        for k, w in enumerate(argv[1:-1], start=1):
            if w.value in ("--run", "--command"):
                return argv[k + 1]
        return None
    if name == "watch":
        rest = argv[1 + skip_options(argv[1:], 0, {"-n", "--interval", "-d"}) :]
        if any(w.value in ("-x", "--exec") for w in argv[1:]):
            return None
        return Word(" ".join(w.value for w in rest)) if rest else None
    return None
