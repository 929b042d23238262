"""Tests for the search_files engine (habakkuk.tools.file_search) and the .gitignore matcher."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from habakkuk.tools import file_search
from habakkuk.tools.file_search import SearchError, search_files
from habakkuk.tools.gitignore import Gitignore

HAVE_RG = shutil.which("rg") is not None


@pytest.fixture(params=["walker", "rg"])
def use_rg(request: pytest.FixtureRequest) -> bool:
    """Run a test against the Python walker and, when it is installed, ripgrep."""
    param: str = request.param
    if param == "rg" and not HAVE_RG:
        pytest.skip("ripgrep (rg) is not installed")
    return param == "rg"


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def found(result: file_search.SearchResult) -> list[tuple[str, int, str]]:
    return [(m.path, m.line, m.text) for m in result.matches]


# --- searching ---------------------------------------------------------------------------


async def test_regex_matches_lines_with_paths_relative_to_root(
    tmp_path: Path, use_rg: bool
) -> None:
    write(tmp_path / "src/app.py", "import os\ndef main():\n    return os.getcwd()\n")
    write(tmp_path / "README.md", "main entry is src/app.py\n")
    result = await search_files(r"def \w+\(", tmp_path, use_rg=use_rg)
    assert found(result) == [("src/app.py", 2, "def main():")]
    assert result.engine == ("rg" if use_rg else "walker")
    assert not result.truncated
    assert result.render() == "src/app.py:2: def main():"


async def test_results_are_in_path_order(tmp_path: Path, use_rg: bool) -> None:
    for name in ["b.txt", "a/z.txt", "a.txt", "c/d/e.txt"]:
        write(tmp_path / name, "needle\n")
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    assert [m.path for m in result.matches] == ["a/z.txt", "a.txt", "b.txt", "c/d/e.txt"]


async def test_ignore_case(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "Hello\nhello\nHELLO\nhelp\n")
    sensitive = await search_files("hello", tmp_path, use_rg=use_rg)
    insensitive = await search_files("hello", tmp_path, ignore_case=True, use_rg=use_rg)
    assert [m.line for m in sensitive.matches] == [2]
    assert [m.line for m in insensitive.matches] == [1, 2, 3]


async def test_glob_limits_files_by_name_and_by_path(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "a.py", "x\n")
    write(tmp_path / "pkg/b.py", "x\n")
    write(tmp_path / "pkg/c.txt", "x\n")
    write(tmp_path / "other/d.py", "x\n")
    by_name = await search_files("x", tmp_path, glob="*.py", use_rg=use_rg)
    assert [m.path for m in by_name.matches] == ["a.py", "other/d.py", "pkg/b.py"]
    by_path = await search_files("x", tmp_path, glob="pkg/*.py", use_rg=use_rg)
    assert [m.path for m in by_path.matches] == ["pkg/b.py"]
    excluded = await search_files("x", tmp_path, glob="!*.py", use_rg=use_rg)
    assert [m.path for m in excluded.matches] == ["pkg/c.txt"]
    braces = await search_files("x", tmp_path, glob="*.{txt,md}", use_rg=use_rg)
    assert [m.path for m in braces.matches] == ["pkg/c.txt"]


async def test_path_limits_the_search_to_a_folder_or_file(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "a/one.txt", "x\n")
    write(tmp_path / "b/two.txt", "x\n")
    in_folder = await search_files("x", tmp_path, path=tmp_path / "b", use_rg=use_rg)
    assert [m.path for m in in_folder.matches] == ["b/two.txt"]
    one_file = await search_files("x", tmp_path, path=tmp_path / "a/one.txt", use_rg=use_rg)
    assert [m.path for m in one_file.matches] == ["a/one.txt"]


async def test_missing_path_is_a_clear_error(tmp_path: Path, use_rg: bool) -> None:
    with pytest.raises(SearchError, match="search path nope does not exist"):
        await search_files("x", tmp_path, path=tmp_path / "nope", use_rg=use_rg)


async def test_files_only_lists_each_matching_file_once(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "a.txt", "x\nx\nx\n")
    write(tmp_path / "b.txt", "y\n")
    write(tmp_path / "c/d.txt", "x\n")
    result = await search_files("x", tmp_path, files_only=True, use_rg=use_rg)
    assert result.files == ["a.txt", "c/d.txt"]
    assert result.matches == []
    assert result.render() == "a.txt\nc/d.txt"


async def test_max_results_truncates_and_says_so(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "hit\n" * 10)
    result = await search_files("hit", tmp_path, max_results=3, use_rg=use_rg)
    assert [m.line for m in result.matches] == [1, 2, 3]
    assert result.truncated
    assert result.render().splitlines()[-1].startswith("[Stopped at 3 matches; there are more.")

    exact = await search_files("hit", tmp_path, max_results=10, use_rg=use_rg)
    assert len(exact.matches) == 10
    assert not exact.truncated


async def test_max_results_truncates_files_only(tmp_path: Path, use_rg: bool) -> None:
    for i in range(5):
        write(tmp_path / f"f{i}.txt", "hit\n")
    result = await search_files("hit", tmp_path, files_only=True, max_results=2, use_rg=use_rg)
    assert result.files == ["f0.txt", "f1.txt"]
    assert result.truncated
    assert "[Stopped at 2 files" in result.render()


async def test_max_results_is_clamped_to_2000(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "hit\n" * 2100)
    result = await search_files("hit", tmp_path, max_results=50_000, use_rg=use_rg)
    assert len(result.matches) == 2000
    assert result.truncated


async def test_long_lines_are_cut_at_300_characters(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "min.js", "needle" + "a" * 1000 + "\n")
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    text = result.matches[0].text
    assert text == ("needle" + "a" * 1000)[:300] + "…"


async def test_crlf_line_endings_are_not_part_of_the_text(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "win.txt", b"alpha\r\nbeta\r\n")
    result = await search_files("a$", tmp_path, use_rg=use_rg)
    assert found(result) == [("win.txt", 1, "alpha"), ("win.txt", 2, "beta")]


async def test_pattern_starting_with_a_dash_is_a_pattern(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "a --verbose flag\n")
    result = await search_files("--verbose", tmp_path, use_rg=use_rg)
    assert found(result) == [("f.txt", 1, "a --verbose flag")]


async def test_invalid_regex_is_a_one_line_error(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "x\n")
    with pytest.raises(SearchError) as info:
        await search_files("(unclosed", tmp_path, use_rg=use_rg)
    message = str(info.value)
    assert message.startswith("invalid regular expression '(unclosed': ")
    assert "\n" not in message


async def test_invalid_glob_is_an_error(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "x\n")
    with pytest.raises(SearchError, match=r"^invalid glob '\*\.\{py'"):
        await search_files("x", tmp_path, glob="*.{py", use_rg=use_rg)


async def test_no_matches_renders_plainly(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "f.txt", "x\n")
    result = await search_files("zzz", tmp_path, use_rg=use_rg)
    assert result.matches == [] and not result.truncated
    assert result.render() == "No matches."


async def test_empty_pattern_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SearchError, match="pattern is empty"):
        await search_files("", tmp_path, use_rg=False)


# --- what is skipped ---------------------------------------------------------------------


async def test_hidden_entries_and_git_folder_are_skipped(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "visible.txt", "needle\n")
    write(tmp_path / ".env", "needle\n")
    write(tmp_path / ".config/settings.txt", "needle\n")
    write(tmp_path / ".git/HEAD", "needle\n")
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    assert [m.path for m in result.matches] == ["visible.txt"]


async def test_binary_files_are_skipped(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "text.txt", "needle\n")
    write(tmp_path / "blob.bin", b"needle\n\x00\x01\x02needle\n")
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    assert [m.path for m in result.matches] == ["text.txt"]


async def test_files_over_5_mb_are_skipped(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / "small.txt", "needle\n")
    write(tmp_path / "big.txt", "needle\n" + "x" * (5 * 1024 * 1024))
    write(tmp_path / "edge.txt", "needle\n" + "x" * (5 * 1024 * 1024 - 7))  # exactly 5 MB
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    assert [m.path for m in result.matches] == ["edge.txt", "small.txt"]


async def test_symlinks_are_not_followed(tmp_path: Path, use_rg: bool) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.txt", "needle\n")
    root = tmp_path / "ws"
    write(root / "real.txt", "needle\n")
    os.symlink(outside, root / "linked_dir")
    os.symlink(outside / "secret.txt", root / "linked_file.txt")
    result = await search_files("needle", root, use_rg=use_rg)
    assert [m.path for m in result.matches] == ["real.txt"]


async def test_gitignore_rules_are_honoured(tmp_path: Path, use_rg: bool) -> None:
    write(
        tmp_path / ".gitignore",
        "# comment\n*.log\n!keep.log\n/top.txt\nbuild/\ndocs/**/draft.md\n",
    )
    files = {
        "app.log": False,  # *.log
        "sub/deep.log": False,  # unanchored glob matches at any depth
        "keep.log": True,  # re-included by negation (the last matching rule wins)
        "top.txt": False,  # anchored: only at the root
        "sub/top.txt": True,
        "build/out.txt": False,  # dir-only rule
        "sub/build/out.txt": False,
        "build.txt": True,  # the dir-only rule does not match a file named build
        "docs/draft.md": False,  # ** matches zero folders
        "docs/a/b/draft.md": False,
        "docs/a/final.md": True,
    }
    for name in files:
        write(tmp_path / name, "needle\n")
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    assert sorted(m.path for m in result.matches) == sorted(n for n, kept in files.items() if kept)


async def test_nested_gitignore_is_relative_to_its_folder(tmp_path: Path, use_rg: bool) -> None:
    write(tmp_path / ".gitignore", "*.tmp\n")
    write(tmp_path / "pkg/.gitignore", "/local.txt\n!important.tmp\ngen/\n")
    for name in [
        "local.txt",  # pkg's anchored rule does not reach the root
        "pkg/local.txt",  # ignored by pkg/.gitignore
        "pkg/sub/local.txt",  # anchored to pkg, so not this one
        "x.tmp",  # root rule
        "pkg/important.tmp",  # the deeper file re-includes it
        "pkg/other.tmp",  # the root rule still applies below
        "pkg/gen/code.py",
        "gen/code.py",  # pkg's rule does not apply outside pkg
    ]:
        write(tmp_path / name, "needle\n")
    result = await search_files("needle", tmp_path, use_rg=use_rg)
    assert sorted(m.path for m in result.matches) == [
        "gen/code.py",
        "local.txt",
        "pkg/important.tmp",
        "pkg/sub/local.txt",
    ]


async def test_parent_gitignore_applies_when_searching_a_subfolder(
    tmp_path: Path, use_rg: bool
) -> None:
    write(tmp_path / ".gitignore", "*.gen.py\n")
    write(tmp_path / "pkg/a.py", "needle\n")
    write(tmp_path / "pkg/a.gen.py", "needle\n")
    result = await search_files("needle", tmp_path, path=tmp_path / "pkg", use_rg=use_rg)
    assert [m.path for m in result.matches] == ["pkg/a.py"]


async def test_walker_gives_up_after_the_file_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_search, "WALK_MAX_FILES", 3)
    for i in range(6):
        write(tmp_path / f"f{i}.txt", "needle\n")
    result = await search_files("needle", tmp_path, use_rg=False)
    assert [m.path for m in result.matches] == ["f0.txt", "f1.txt", "f2.txt"]
    assert result.incomplete == "gave up after 3 files"
    assert result.render().endswith("[Search incomplete: gave up after 3 files.]")


async def test_walker_gives_up_after_the_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_search, "WALK_TIME_LIMIT", -1.0)  # already past the deadline
    write(tmp_path / "f.txt", "needle\n")
    result = await search_files("needle", tmp_path, use_rg=False)
    assert result.matches == []
    assert result.incomplete == "gave up after -1 seconds"
    assert "Search incomplete" in result.render()


async def test_walker_is_chosen_when_rg_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)  # as file_search looks rg up
    write(tmp_path / "f.txt", "needle\n")
    result = await search_files("needle", tmp_path)
    assert result.engine == "walker"
    assert [m.path for m in result.matches] == ["f.txt"]


# --- the .gitignore matcher on its own ------------------------------------------------------


def test_gitignore_last_matching_rule_wins() -> None:
    rules = Gitignore().with_lines(["*.txt", "!keep*.txt", "keep-not.txt"])
    assert rules.match("a.txt", False) is True
    assert rules.match("keep.txt", False) is False
    assert rules.match("keep-not.txt", False) is True
    assert rules.match("a.py", False) is None


def test_gitignore_double_star_forms() -> None:
    rules = Gitignore().with_lines(["**/cache", "logs/**", "a/**/z"])
    assert rules.match("cache", True)
    assert rules.match("x/y/cache", True)
    assert rules.match("logs/one/two.txt", False)
    assert rules.match("logs", True) is None  # logs/** matches what is inside, not logs
    assert rules.match("a/z", False)
    assert rules.match("a/b/c/z", False)
    assert rules.match("b/a/z", False) is None


def test_gitignore_is_ignored_checks_parent_folders() -> None:
    rules = Gitignore().with_lines(["build/", "!build/keep.txt"])
    # A file inside an ignored folder cannot be re-included, as in git.
    assert rules.is_ignored("build/keep.txt")
    assert rules.is_ignored("src/build", is_dir=True)
    assert not rules.is_ignored("src/build")  # a file named build is not a folder
    assert not rules.is_ignored("src/main.py")


def test_gitignore_character_classes_escapes_and_trailing_spaces() -> None:
    rules = Gitignore().with_lines(["file[0-9].txt", "[!a]x", "\\#literal", "\\!bang", "sp   "])
    assert rules.match("file7.txt", False)
    assert rules.match("fileA.txt", False) is None
    assert rules.match("bx", False)
    assert rules.match("ax", False) is None
    assert rules.match("#literal", False)
    assert rules.match("!bang", False)
    assert rules.match("sp", False)


def test_gitignore_rules_from_a_subfolder_only_apply_there(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/.gitignore").write_text("/only-here.txt\nanywhere.txt\n")
    rules = Gitignore().with_file(tmp_path / "pkg/.gitignore", "pkg")
    assert rules.match("pkg/only-here.txt", False)
    assert rules.match("pkg/sub/only-here.txt", False) is None
    assert rules.match("only-here.txt", False) is None
    assert rules.match("pkg/sub/anywhere.txt", False)
    assert rules.match("anywhere.txt", False) is None
    assert Gitignore().with_file(tmp_path / "missing/.gitignore") is not None
