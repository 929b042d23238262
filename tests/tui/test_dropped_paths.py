"""Splitting a message into the files dropped on the terminal (their pasted paths) and the
rest of its text (habakkuk.screens.dropped)."""

from __future__ import annotations

from pathlib import Path

from habakkuk.screens.dropped import Dropped, regular_file, split_dropped

FILES = {"/home/me/report.pdf", "/home/me/my shot.png", "/tmp/it's.txt", '/tmp/say "hi".md'}


def exists(path: str) -> bool:
    return path in FILES


def test_a_bare_path_is_a_file_and_no_text() -> None:
    assert split_dropped("/home/me/report.pdf", exists) == Dropped(("/home/me/report.pdf",), "")


def test_single_quoted_double_quoted_and_escaped_paths_are_read_as_a_shell_reads_them() -> None:
    for pasted in (
        "'/home/me/my shot.png'",
        '"/home/me/my shot.png"',
        "/home/me/my\\ shot.png",
        "file:///home/me/my%20shot.png",
    ):
        assert split_dropped(pasted, exists) == Dropped(("/home/me/my shot.png",), ""), pasted


def test_several_paths_separated_by_spaces_are_all_attached_in_order() -> None:
    dropped = split_dropped("'/home/me/my shot.png' /home/me/report.pdf ", exists)
    assert dropped == Dropped(("/home/me/my shot.png", "/home/me/report.pdf"), "")


def test_the_text_around_the_paths_is_the_message() -> None:
    dropped = split_dropped("summarise /home/me/report.pdf please\nin French", exists)
    assert dropped.paths == ("/home/me/report.pdf",)
    assert dropped.text == "summarise  please\nin French"


def test_a_path_that_names_no_file_stays_text() -> None:
    text = "compare /home/me/report.pdf with /home/me/missing.pdf"
    dropped = split_dropped(text, exists)
    assert dropped.paths == ("/home/me/report.pdf",)
    assert dropped.text == "compare  with /home/me/missing.pdf"
    assert split_dropped("/help", exists) == Dropped((), "/help")


def test_a_quote_inside_a_word_is_a_letter_and_escaped_quotes_are_undone() -> None:
    assert split_dropped("it's /tmp/it\\'s.txt", exists) == Dropped(("/tmp/it's.txt",), "it's")
    assert split_dropped('"/tmp/say \\"hi\\".md"', exists).paths == ('/tmp/say "hi".md',)


def test_relative_words_and_remote_file_urls_are_never_paths() -> None:
    assert split_dropped("report.pdf file://server/home/me/report.pdf", exists).paths == ()


def test_a_home_relative_path_is_expanded() -> None:
    home = str(Path("~").expanduser())
    dropped = split_dropped("~/notes.md", lambda p: p == f"{home}/notes.md")
    assert dropped.paths == (f"{home}/notes.md",)


def test_only_regular_files_count(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    assert regular_file(str(tmp_path / "a.txt"))
    assert not regular_file(str(tmp_path))
    assert not regular_file(str(tmp_path / "missing"))
