"""A huge note dropped into a memory folder: read up to a cap, flagged, never a stall.

A 21 MB `.md` made every memory request time out (the snippet was built over the whole
file on the database thread, in time growing faster than the size) and `--serve`
ignore SIGTERM for a minute. Notes are now read up to READ_MAX_BYTES (what is over it is
indexed up to the cap and flagged), snippets look at a bounded window, and a sync writes
its notes in batches of bounded size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import aiohttp
import pytest

from habakkuk.cli import main
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.engine.snippets import LOOK_AHEAD, LOOK_BACK, SNIPPET_SCAN, Highlighter
from habakkuk.knowledge.index import BATCH_BYTES, BATCH_FILES, batches
from habakkuk.knowledge.memory_views import PARTIAL_MARK
from habakkuk.knowledge.notes import READ_MAX_BYTES, FileStat, NoteFiles
from habakkuk.knowledge.service import Memory
from habakkuk.services.doctor import run_checks
from tests.conftest import WriteConfig, mock_config
from tests.processes import StartServe, free_port, stop, until_http

from .conftest import USER

HEAD = "---\ntitle: Big log\ntrust: untrusted\n---\nEarly words about the harbour.\n"


def big_note(folder: Path, *, size: int, tail_word: str = "lateword") -> Path:
    """A note of `size` bytes: a word near the start, filler, `tail_word` past the cap."""
    folder.mkdir(parents=True, exist_ok=True)
    filler = "coffee garden river notes\n" * ((size - len(HEAD)) // 26)
    text = HEAD + filler[: READ_MAX_BYTES + 100 - len(HEAD)] + f" {tail_word} "
    text += filler[: max(0, size - len(text))]
    path = folder / "big.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_read_stops_at_the_cap_and_keeps_whole_characters(tmp_path: Path) -> None:
    files = NoteFiles(tmp_path)
    # "é" is two bytes: one falls across the cap and is left out, not replaced.
    (tmp_path / "wide.md").write_text("é" * (READ_MAX_BYTES // 2 + 10), encoding="utf-8")
    found = files.read("wide")
    assert found is not None and found.partial
    assert found.text == "é" * (READ_MAX_BYTES // 2)
    (tmp_path / "crlf.md").write_bytes(b"one\r\ntwo\rthree \xff\n")
    small = files.read("crlf")
    assert small is not None and not small.partial
    assert small.text == "one\ntwo\nthree \ufffd\n"  # as a text-mode read gives it


async def test_a_note_over_the_cap_is_indexed_up_to_the_cap_and_flagged(
    home: Home, memory: Memory
) -> None:
    folder = home.agent_dir("main") / "memory"
    path = big_note(folder, size=2 * READ_MAX_BYTES)
    await memory.save("main", "Small", "A harbour walk.", provenance=USER)
    hits = await memory.search("main", "harbour")
    assert {h.note.slug: h.note.partial for h in hits} == {"big": True, "small": False}
    assert await memory.search("main", "lateword") == []  # past the cap: not indexed
    notes, _ = await memory.list_notes("main")
    assert {n.slug: n.partial for n in notes} == {"big": True, "small": False}
    note = await memory.read("main", "big")
    assert note.partial and note.title == "Big log"
    assert note.body.startswith("Early words") and len(note.body) < READ_MAX_BYTES
    db = await memory.database("main")
    stored = await db.run(lambda conn: conn.execute("SELECT body FROM notes_fts").fetchall())
    assert max(len(row[0]) for row in stored) < READ_MAX_BYTES

    # Rewriting it from what was read would cut it at the cap: refused, the file kept.
    before = path.read_bytes()
    for write in (
        memory.save("main", "Big", "short", provenance=USER),
        memory.replace("main", "big", "Big log", "short", provenance=USER),
        memory.trust("main", "big", provenance=USER),
    ):
        with pytest.raises(HabakkukError, match=r"memory/big\.md is 256 KB: only its first"):
            await write
    assert path.read_bytes() == before
    # Forgetting moves the whole file to the trash.
    await memory.forget("main", "big", provenance=USER)
    (trashed,) = (folder / ".trash").glob("big-*.md")
    assert trashed.read_bytes() == before


def test_doctor_the_list_and_show_flag_a_note_over_the_cap(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config())
    big_note(home.agent_dir("main") / "memory", size=READ_MAX_BYTES + 5_000)
    checks = asyncio.run(run_checks(home))
    (line,) = [c.line() for c in checks if c.name == "memory main"]
    assert line == (
        "WARN  memory main: memory/big.md is 132 KB: only its first 128 KB are indexed and "
        "shown; split it into smaller notes"
    )
    assert main(["memory", "list"]) == 0
    assert PARTIAL_MARK in capsys.readouterr().out
    assert main(["memory", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memories"][0]["partial"] is True
    assert main(["memory", "show", "big"]) == 0
    shown = capsys.readouterr()
    assert "only its beginning is indexed and shown" in shown.err
    assert shown.out.count("Early words") == 1


def test_a_snippet_looks_at_a_bounded_window_of_one_huge_line() -> None:
    words = Highlighter("needle")
    line = "hay " * 2_000_000  # 8 MB on one line
    far = line[: SNIPPET_SCAN + 10] + " needle " + line
    assert words.snippet(far) is None  # a match past the window is not looked for
    near = "hay " * 100 + "needle " + line
    found = words.snippet(near)
    assert found is not None and "[needle]" in found
    assert len(found) < LOOK_BACK + LOOK_AHEAD  # 16 words around it, not the line


def test_a_snippet_of_many_lines_all_matching_is_sixteen_words() -> None:
    text = "coffee\n" * 500_000
    found = Highlighter("coffee").snippet(text)
    assert found == "[coffee]\n" * 15 + "[coffee]…"
    runs = Highlighter("runs").snippet("A list.\n" + "She was running a marathon. " * 1000)
    assert runs is not None and runs.startswith("…She was [running] a marathon.")


def test_snippets_keep_the_short_note_shapes_of_fts5() -> None:
    assert Highlighter("gardening").snippet("Some gardening on Sunday.") == (
        "Some [gardening] on Sunday."
    )
    assert Highlighter("coffee").snippet("# Small\n\ncoffee notes") == "# Small\n\n[coffee] notes"
    assert Highlighter("Parties").snippet("The party was great.") == "The [party] was great."


def test_a_sync_writes_in_batches_of_bounded_text() -> None:
    many = [FileStat(f"n{i}", 0, 1_000) for i in range(2_000)]
    sizes = [len(batch) for batch in batches(many)]
    assert sum(sizes) == 2_000
    assert max(sizes) <= min(BATCH_FILES, BATCH_BYTES // 1_000)
    mixed = [FileStat("a", 0, 100), FileStat("big", 0, 21_000_000), FileStat("b", 0, 100)]
    assert [[f.slug for f in batch] for batch in batches(mixed)] == [["a"], ["big"], ["b"]]


@pytest.mark.timeout(120)
async def test_serve_answers_a_memory_search_and_stops_with_a_21_mb_note(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    extra = f"http:\n  listen: 127.0.0.1:{port}\n  token_env: SERVE_TOKEN\n"
    (home / "config.yaml").write_text(mock_config(extra=extra), encoding="utf-8")
    folder = home / "agents" / "main" / "memory"
    big_note(folder, size=21 * 1024 * 1024)
    process = await serve_process(home, SERVE_TOKEN="serve-token-0123456789")
    await until_http(process)
    url = f"http://127.0.0.1:{port}/api/memory/main"
    headers = {"Authorization": "Bearer serve-token-0123456789"}
    async with aiohttp.ClientSession(headers=headers) as client:
        # Bounded waits: before, this search did not answer within minutes.
        async with asyncio.timeout(30), client.get(url, params={"q": "coffee"}) as response:
            assert response.status == 200
            found = await response.json()
        assert found["memories"][0]["slug"] == "big"
        assert found["memories"][0]["partial"] is True
        assert len(found["memories"][0]["snippet"]) < 1_000
    await stop(process)  # exit 0, no traceback


def test_the_memory_screen_marks_a_note_read_in_part() -> None:
    from habakkuk.knowledge.memory_types import NoteSummary
    from habakkuk.screens.memory import title_cell

    note = NoteSummary("big", "Big log", (), "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert PARTIAL_MARK not in title_cell(note).plain
    marked = title_cell(dataclasses.replace(note, partial=True))
    assert marked.plain == f"Big log {PARTIAL_MARK}"
