"""edit_file: exact old -> new replacement, unique unless replace_all, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.toolkit.registry import ToolContext, ToolError
from habakkuk.tools.edit import EditFile
from tests.helpers import tool_context


def ctx_for(tmp_path: Path) -> ToolContext:
    return tool_context(tmp_path)


async def edit(ctx: ToolContext, **args: Any) -> str:
    return (await EditFile().run(args, ctx)).text


async def test_unique_match_is_replaced(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.py").write_text("x = 1\ny = 2\n")
    text = await edit(ctx, path="a.py", old_string="y = 2", new_string="y = 3")
    assert "replaced 1 occurrence" in text
    assert (ctx.workspace / "a.py").read_text() == "x = 1\ny = 3\n"


async def test_ambiguous_match_is_refused_and_the_file_is_untouched(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.py").write_text("a = 0\na = 0\n")
    with pytest.raises(ToolError, match=r"occurs 2 times.*replace_all"):
        await edit(ctx, path="a.py", old_string="a = 0", new_string="a = 1")
    assert (ctx.workspace / "a.py").read_text() == "a = 0\na = 0\n"


async def test_replace_all_changes_every_occurrence(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.py").write_text("a = 0\na = 0\n")
    text = await edit(ctx, path="a.py", old_string="0", new_string="1", replace_all=True)
    assert "replaced 2 occurrences" in text
    assert (ctx.workspace / "a.py").read_text() == "a = 1\na = 1\n"


async def test_missing_text_names_a_near_miss_line(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.py").write_text("def f():\n    return 1\n")
    with pytest.raises(ToolError, match=r"not found.*line 2"):
        await edit(ctx, path="a.py", old_string="  return 1\n  # x", new_string="")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("", "x", "old_string is empty"), ("same", "same", "the same")],
)
async def test_empty_or_identical_old_text_is_refused(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.txt").write_text("same\n")
    with pytest.raises(ToolError, match=message):
        await edit(ctx, path="a.txt", old_string=old, new_string=new)


async def test_missing_file_points_to_write_file(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="no such file; use write_file"):
        await edit(ctx_for(tmp_path), path="nope.txt", old_string="a", new_string="b")


async def test_crlf_file_stays_crlf(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await edit(ctx, path="w.txt", old_string="one\ntwo\n", new_string="uno\ndos\n")
    assert (ctx.workspace / "w.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


async def test_binary_file_is_refused(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "b.bin").write_bytes(b"\0\1\2abc")
    with pytest.raises(ToolError, match="binary"):
        await edit(ctx, path="b.bin", old_string="abc", new_string="x")


async def test_file_mode_is_kept(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    script = ctx.workspace / "run.sh"
    script.write_text("echo a\n")
    script.chmod(0o755)
    await edit(ctx, path="run.sh", old_string="a", new_string="b")
    assert script.stat().st_mode & 0o777 == 0o755
