"""search_files as a tool: results relative to the workspace, errors as tool errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.toolkit.registry import ToolContext, ToolError
from habakkuk.tools.search_tool import SearchFiles
from tests.helpers import tool_context


def ctx_for(tmp_path: Path) -> ToolContext:
    return tool_context(tmp_path, mode="read-only")


async def test_matches_are_listed_with_paths_relative_to_the_workspace(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "pkg").mkdir()
    (ctx.workspace / "pkg" / "mod.py").write_text("def alpha():\n    return 'beta'\n")
    (ctx.workspace / ".gitignore").write_text("ignored.py\n")
    (ctx.workspace / "ignored.py").write_text("def alpha(): pass\n")
    out = await SearchFiles().run({"pattern": r"def \w+"}, ctx)
    assert "pkg/mod.py:1: def alpha():" in out.text
    assert "ignored.py" not in out.text


async def test_files_only_and_path_limit(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    for sub in ("a", "b"):
        (ctx.workspace / sub).mkdir()
        (ctx.workspace / sub / "x.txt").write_text("needle\n")
    out = await SearchFiles().run({"pattern": "needle", "path": "b", "files_only": True}, ctx)
    assert out.text.splitlines()[0] == "b/x.txt" and "a/x.txt" not in out.text


async def test_bad_pattern_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="search_files"):
        await SearchFiles().run({"pattern": "("}, ctx_for(tmp_path))


async def test_missing_path_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await SearchFiles().run({"pattern": "x", "path": "nope"}, ctx_for(tmp_path))
