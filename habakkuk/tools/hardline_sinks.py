"""What runs its input as a program: the sinks the hardline blocklist keeps downloads out of.

A download piped into a shell is the danger :mod:`habakkuk.tools.hardline` refuses; this
module answers the other half of that question for one pipeline element: does the
text that reaches its stdin end up run as code? It does when the element is

* a shell or interpreter that reads its program from stdin (``sh``, ``bash -s``,
  ``python3 -``, ``sudo -s``, behind any wrapper ``resolve`` peels off: ``env``,
  ``nice``, ``timeout``, ``stdbuf``, ``busybox``...);
* ``xargs`` or ``parallel`` building a command whose program an input item becomes
  (``xargs sh -c``, ``xargs -I{} bash -c '{}'``, ``xargs python3``, ``parallel``
  alone, which runs each line as a command);
* code that reads stdin and runs it: ``bash -c "$(cat)"``, ``eval "$(cat)"``,
  ``sh -c 'sh'``, ``env -S 'sh -s'``, ``while read l; do eval "$l"; done``;
* an interpreter whose inline code evaluates what it reads (``python3 -c
  'exec(sys.stdin.read())'``, ``perl -ne 'system $_'``, ``awk '{system($0)}'``,
  ``sed 's/.*/&/e'``);
* a process substitution ``>(sh)`` among its words or redirections (``tee >(sh)``).

Filters in between do not make a download safe (``curl URL | base64 -d | sh``): the
blocklist looks for a sink anywhere after the download in the pipeline.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator

from habakkuk.tools.shell_syntax import (
    STDIN_PATHS,
    Element,
    Pipeline,
    Resolved,
    SimpleCommand,
    Word,
    basename,
    expand_words,
    invocation,
    is_interpreter,
    parse,
    resolve,
    shell_code,
    simple_commands,
)
from habakkuk.tools.shell_syntax.lexer import EXPANSION

__all__ = ["evaluates_lines", "program_sink", "resolved_command", "runs_stdin"]

# Nesting bound for code inside code (sh -c 'sh -c ...'): deeper text is not examined.
MAX_DEPTH = 12
# An input item of xargs, to see where it lands in the command xargs builds.
_ITEM = "\x00item"


@functools.lru_cache(maxsize=1024)
def resolved_command(simple: SimpleCommand) -> Resolved | None:
    """The command a simple command runs, its words expanded as a shell would."""
    return resolve(expand_words(simple.words))


# ---------------------------------------------------------------------------
# Substitutions that read stdin: `$(cat)`, `$(</dev/stdin)`, `$(base64 -d)`.
# ---------------------------------------------------------------------------


# Filters that read stdin when no file is named: how many leading operands are not files
# (a sed script, a grep pattern); -1 when stdin is read whatever the operands (tee, tr).
def _names(text: str) -> list[str]:
    return text.split()


_STDIN_FILTERS: dict[str, int] = {
    **dict.fromkeys(
        _names(
            "cat tac head tail base64 base32 basenc xxd uudecode gunzip zcat gzip bzip2 bunzip2"
            " bzcat xz unxz xzcat zstd zstdcat unzstd lz4 lz4cat rev cut sort uniq fold fmt"
            " iconv nl paste column strings od hexdump"
        ),
        0,
    ),
    **dict.fromkeys(_names("sed awk gawk mawk nawk grep egrep fgrep jq"), 1),
    **dict.fromkeys(_names("tee tr"), -1),
}
_SCRIPT_OPTS = {"-e", "-f", "--expression", "--file", "--regexp", "--source"}


def _filter_reads_stdin(name: str, args: list[str]) -> bool:
    """Whether the filter `name` with `args` reads its stdin (no input file named)."""
    leading = _STDIN_FILTERS.get(name)
    if leading is None:
        if name in ("dd", "dcfldd", "dc3dd"):
            return not any(a.startswith("if=") for a in args)
        if name == "openssl":
            return "-in" not in args
        return False
    if leading < 0:
        return True
    if any(a.split("=", 1)[0] in _SCRIPT_OPTS for a in args):
        leading = 0  # the script or pattern came with an option
    operands = [a for a in args if a == "-" or not a.startswith("-")]
    return all(a in STDIN_PATHS for a in operands[leading:])


@functools.lru_cache(maxsize=256)
def _substitution_reads_stdin(text: str) -> bool:
    """Whether a `$(...)` body reads the stdin it inherits (its output is then stdin)."""
    for pipeline in parse(text):
        first = pipeline.commands[0] if pipeline.commands else None
        if not isinstance(first, SimpleCommand):
            continue
        if not first.words:  # $(</dev/stdin): bash reads the file
            if any(
                r.op == "<" and r.target and r.target.value in STDIN_PATHS for r in first.redirects
            ):
                return True
            continue
        resolved = resolved_command(first)
        if resolved is None or not resolved.argv:
            continue
        if any(r.sets_stdin for r in first.redirects):
            continue
        name = basename(resolved.argv[0].value)
        if _filter_reads_stdin(name, [w.value for w in resolved.argv[1:]]):
            return True
    return False


# ---------------------------------------------------------------------------
# Inline code that runs what it reads.
# ---------------------------------------------------------------------------

_EVALUATORS: list[tuple[re.Pattern[str], re.Pattern[str]]] = [
    (
        re.compile(r"(?:python|pypy)[\d.]*"),
        re.compile(
            r"(?<![\w.])(?:exec|eval|compile)\s*\(|\bos\s*\.\s*(?:system|popen|exec\w*|spawn\w*)"
            r"|\bsubprocess\b|\bpty\s*\.\s*spawn|\brunpy\b"
        ),
    ),
    (re.compile(r"perl[\d.]*"), re.compile(r"\b(?:eval|system|exec|qx)\b|`|\bopen\b[^;]*\|")),
    (
        re.compile(r"ruby[\d.]*|jruby|irb"),
        re.compile(r"\b(?:eval|instance_eval|class_eval|system|exec|spawn|popen|Open3)\b|`|%x"),
    ),
    (
        re.compile(r"node(?:js)?|bun"),
        re.compile(
            r"\b(?:eval|Function|exec|execSync|execFile|execFileSync|spawn|spawnSync)\b"
            r"|\bchild_process\b|\bvm\b"
        ),
    ),
    (
        re.compile(r"php[\d.]*"),
        re.compile(r"\b(?:eval|assert|system|exec|shell_exec|passthru|popen|proc_open)\b|`"),
    ),
    (
        re.compile(r"lua[\d.]*|luajit"),
        re.compile(r"\b(?:load|loadstring|dofile)\b|os\.execute|io\.popen"),
    ),
    (
        re.compile(r"pwsh|powershell(?:\.exe)?"),
        re.compile(r"\b(?:iex|invoke-expression|invoke-command)\b|scriptblock", re.I),
    ),
    (re.compile(r"R|Rscript"), re.compile(r"\b(?:eval|parse|source|system|system2)\s*\(")),
    (re.compile(r"osascript"), re.compile(r"do\s+shell\s+script", re.I)),
]
_AWKS = {"awk", "gawk", "mawk", "nawk"}
_AWK_ARG_OPTS = {"-F", "-v", "-f", "--file", "-i", "--include", "-l", "--load"}
# system(...) runs a command; `print ... | "cmd"` pipes into one (a line read becomes its input).
_AWK_RUNS = re.compile(r"\bsystem\s*\(|\bprintf?\b[^;{}]*\|&?\s*\S")


def _evaluates(name: str, code: str) -> bool:
    """Whether interpreter `name`'s inline `code` runs text as code or commands."""
    for pattern, runs in _EVALUATORS:
        if pattern.fullmatch(name):
            return runs.search(code) is not None
    return False


def _awk_runs_input(args: list[str]) -> bool:
    """awk '{system($0)}' and kin: the program runs commands built from its input."""
    programs: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a in ("-e", "--source") and i < len(args):
            programs.append(args[i])
            i += 1
        elif a in ("-f", "--file"):
            return False  # a program file: not visible here
        elif a in _AWK_ARG_OPTS:
            i += 1
        elif a.startswith("-") and a != "-":
            continue
        else:
            if not programs:
                programs.append(a)
            break
    return any(_AWK_RUNS.search(p) for p in programs)


_SED_ADDRESS = re.compile(
    r"^\s*(?:(?:\d+|\$|/(?:\\.|[^/])*/)(?:,(?:\d+|\$|/(?:\\.|[^/])*/))?!?)?\s*"
)


def _sed_runs_input(args: list[str]) -> bool:
    """GNU sed's `e` command and `s///e` flag run the pattern space (the input) as a command."""
    scripts = [b for a, b in itertools.pairwise(args) if a in ("-e", "--expression")]
    scripts += [a.split("=", 1)[1] for a in args if a.startswith("--expression=")]
    if not scripts:
        scripts = [a for a in args if not a.startswith("-")][:1]
    for script in scripts:
        for piece in re.split(r"[;\n]", script):
            command = _SED_ADDRESS.sub("", piece, count=1).lstrip("{ ")
            if command == "e" or command.startswith("e "):
                return True
            if len(command) > 1 and command[0] == "s":
                parts = re.split(rf"(?<!\\){re.escape(command[1])}", command[2:])
                if len(parts) >= 3 and "e" in parts[2]:
                    return True
    return False


# ---------------------------------------------------------------------------
# Sinks.
# ---------------------------------------------------------------------------


def _xargs_sink(argv: list[Word], replace: str | None, via: str) -> str | None:
    """The program xargs (or parallel) runs when an input item becomes its code."""
    if replace is None:
        built = [*argv, Word(_ITEM)]
    else:
        built = [Word(w.value.replace(replace, _ITEM), w.subs, w.procs) for w in argv]
    name = basename(built[0].value)
    if _ITEM in built[0].value:
        return f"a command named by its input (through {via})"
    code = shell_code(built)
    if code is not None and _ITEM in code.value:
        return f"{name} (through {via})"
    if is_interpreter(name):
        inv = invocation(built)
        # An item that is the script (or an option before it) can be `-c CODE`: xargs
        # splits its input on blanks and honours quotes.
        for word in (inv.code, inv.script) if inv is not None else ():
            if word is not None and _ITEM in word.value:
                return f"{name} (through {via})"
    return None


def _code_runs_stdin(code: Word, depth: int) -> bool:
    """Whether program text given as a word reads stdin and runs it."""
    if any(_substitution_reads_stdin(sub) for sub in code.subs):
        return True  # bash -c "$(cat)": the code is what stdin holds
    return runs_stdin(code.value, depth + 1) is not None


def _simple_sink(simple: SimpleCommand, depth: int) -> str | None:
    resolved = resolved_command(simple)
    if resolved is None:
        return None
    if any(runs_stdin(code, depth + 1) for code in resolved.extra_code):
        return "env -S"
    argv = resolved.argv
    if not argv:
        return None
    name = basename(argv[0].value)
    if resolved.xargs is not None:
        return _xargs_sink(argv, resolved.xargs.replace, resolved.xargs.via)
    if any(r.sets_stdin for r in simple.redirects):
        return None  # its stdin is a file or a here-document, not the pipe
    inv = invocation(argv) if is_interpreter(name) else None
    if inv is not None and inv.reads_stdin and name != "eval":
        return name
    code = shell_code(argv)  # sh -c, eval, su -c, script -c, watch: shell code
    if code is not None:
        return name if _code_runs_stdin(code, depth) else None
    if inv is not None and inv.code is not None:  # python -c, perl -e, node -e...
        inline = inv.code
        if _evaluates(name, inline.value) or any(map(_substitution_reads_stdin, inline.subs)):
            return name
    values = [w.value for w in argv[1:]]
    if name in _AWKS and _awk_runs_input(values):
        return name
    if name == "sed" and _sed_runs_input(values):
        return "sed (its e command)"
    return None


def _process_sink(words: list[Word], depth: int) -> str | None:
    """A `>(...)` among `words` whose body runs what is written to it (`tee >(sh)`)."""
    for word in words:
        for text, kind in word.parts:
            if kind == EXPANSION and text.startswith(">(") and text.endswith(")"):
                found = runs_stdin(text[2:-1], depth + 1)
                if found:
                    return f"{found} in >(...)"
    return None


def output_sink(element: Element, depth: int) -> str | None:
    """A process substitution the element writes its output into that runs it as code."""
    for simple in simple_commands(element):
        words = [*simple.words, *(r.target for r in simple.redirects if r.target is not None)]
        if any(w.procs for w in words):
            found = _process_sink(words, depth)
            if found:
                return found
    return None


def program_sink(element: Element, depth: int, lines_evaluated: bool = False) -> str | None:
    """What in `element` runs the text on its stdin as a program, or None.

    `lines_evaluated`: the script around the element evaluates variables (`eval "$l"`),
    so a `read` here turns lines of its input into code.
    """
    if depth > MAX_DEPTH:
        return None
    for simple in simple_commands(element):
        found = _simple_sink(simple, depth)
        if found:
            return found
        if lines_evaluated and _reads_lines(simple):
            return "eval of the lines read"
    return output_sink(element, depth)


def _reads_lines(simple: SimpleCommand) -> bool:
    resolved = resolved_command(simple)
    if resolved is None or not resolved.argv:
        return False
    return basename(resolved.argv[0].value) in ("read", "mapfile", "readarray")


def _every_simple(pipelines: list[Pipeline]) -> Iterator[SimpleCommand]:
    """Every simple command of the pipelines, groups entered, each visited once (no list
    is rebuilt per level, so deep nesting stays linear)."""
    stack: list[Iterator[Pipeline]] = [iter(pipelines)]
    while stack:
        pipeline = next(stack[-1], None)
        if pipeline is None:
            stack.pop()
            continue
        for element in pipeline.commands:
            if isinstance(element, SimpleCommand):
                yield element
            else:
                stack.append(iter(element.body))


def evaluates_lines(text: str) -> bool:
    """Whether the script runs a variable's value as code (`eval "$l"`, `sh -c "$l"`)."""
    for simple in _every_simple(parse(text)):
        resolved = resolved_command(simple)
        if resolved is None or not resolved.argv:
            continue
        argv = resolved.argv
        name = basename(argv[0].value)
        if name == "eval":
            if any("$" in w.value for w in argv[1:]):
                return True
            continue
        code = shell_code(argv)
        if code is None and is_interpreter(name):
            inv = invocation(argv)
            code = inv.code if inv is not None else None
        if code is not None and code.value.lstrip().startswith("$"):
            return True
    return False


@functools.lru_cache(maxsize=256)
def runs_stdin(text: str, depth: int) -> str | None:
    """What in the script `text` runs its stdin as a program (the first found), or None."""
    if depth > MAX_DEPTH or not text.strip():
        return None
    lines_evaluated = evaluates_lines(text)
    for pipeline in parse(text):
        for element in pipeline.commands:
            found = program_sink(element, depth, lines_evaluated)
            if found:
                return found
    return None
