"""apply_patch as a tool: real diffs, all-or-nothing, and every path seen by the policy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalRequest
from habakkuk.engine.toolkit.registry import ToolContext, ToolRegistry
from habakkuk.tools.patch_tool import ApplyPatch
from tests.helpers import tool_context


class Recording:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision("deny", "test says no")


def ctx_for(tmp_path: Path, mode: str = "workspace", approver: Any = None) -> ToolContext:
    return tool_context(tmp_path, mode=mode, approver=approver)


async def apply(ctx: ToolContext, patch: str) -> Any:
    registry = ToolRegistry()
    registry.register(ApplyPatch())
    return await registry.call(
        ToolUseBlock("c1", "apply_patch", {"patch": patch}), ctx, {"apply_patch"}
    )


def git_diff(tmp_path: Path, before: dict[str, str], after: dict[str, str | None]) -> str:
    """A real `git diff` between two trees (None in `after` deletes the file)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=repo, env=env, check=True, capture_output=True,
        )  # fmt: skip

    run("init", "-q")
    for name, text in before.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    run("add", "-A")
    run("commit", "-qm", "before")
    for name, changed in after.items():
        if changed is None:
            (repo / name).unlink()
        else:
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(changed)
    run("add", "-A")
    return run("diff", "--cached", "-M").stdout.decode()


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not on PATH")


@needs_git
async def test_a_real_git_diff_applies_to_the_workspace(tmp_path: Path) -> None:
    before = {
        "src/app.py": "import os\n\n\ndef main():\n    print('hi')\n    return 0\n",
        "README.md": "# App\n\nOld text.\n",
        "old.txt": "remove me\n",
    }
    after: dict[str, str | None] = {
        "src/app.py": "import os\nimport sys\n\n\ndef main():\n    print('hello')\n    return 0\n",
        "README.md": "# App\n\nNew text.\n",
        "old.txt": None,
        "docs/new.md": "brand new\n",
    }
    patch = git_diff(tmp_path, before, after)
    ctx = ctx_for(tmp_path)
    for name, text in before.items():
        (ctx.workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx.workspace / name).write_text(text)
    result = await apply(ctx, patch)
    assert not result.is_error, result.text
    for name, expected in after.items():
        path = ctx.workspace / name
        assert (path.read_text() if path.exists() else None) == expected


async def test_begin_patch_format_with_move_applies(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.txt").write_text("one\ntwo\nthree\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n one\n-two\n+TWO\n"
        " three\n*** Add File: c.txt\n+new\n*** End Patch\n"
    )
    result = await apply(ctx, patch)
    assert not result.is_error, result.text
    assert not (ctx.workspace / "a.txt").exists()
    assert (ctx.workspace / "b.txt").read_text() == "one\nTWO\nthree\n"
    assert (ctx.workspace / "c.txt").read_text() == "new\n"


async def test_a_failing_hunk_writes_nothing_and_names_the_hunk(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "a.txt").write_text("alpha\nbeta\n")
    (ctx.workspace / "b.txt").write_text("gamma\ndelta\n")
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n gamma\n-epsilon\n+EPSILON\n"
    )
    result = await apply(ctx, patch)
    assert result.is_error and "b.txt" in result.text and "hunk" in result.text.lower()
    assert (ctx.workspace / "a.txt").read_text() == "alpha\nbeta\n"
    assert (ctx.workspace / "b.txt").read_text() == "gamma\ndelta\n"


async def test_crlf_file_stays_crlf(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    result = await apply(ctx, "--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    assert not result.is_error, result.text
    assert (ctx.workspace / "w.txt").read_bytes() == b"a\r\nB\r\nc\r\n"


async def test_a_patch_touching_a_path_outside_the_workspace_is_asked_about(
    tmp_path: Path,
) -> None:
    approver = Recording()
    ctx = ctx_for(tmp_path, approver=approver)
    (ctx.workspace / "in.txt").write_text("x\n")
    patch = (
        "*** Begin Patch\n*** Update File: in.txt\n@@\n-x\n+y\n"
        "*** Add File: ../escape.txt\n+boo\n*** End Patch\n"
    )
    result = await apply(ctx, patch)
    assert result.is_error and len(approver.asked) == 1
    assert (ctx.workspace / "in.txt").read_text() == "x\n"
    assert not (tmp_path / "escape.txt").exists()


async def test_a_move_target_outside_the_workspace_counts_too(tmp_path: Path) -> None:
    approver = Recording()
    ctx = ctx_for(tmp_path, approver=approver)
    (ctx.workspace / "in.txt").write_text("x\n")
    patch = (
        "*** Begin Patch\n*** Update File: in.txt\n*** Move to: /tmp/elsewhere-habakkuk.txt\n"
        "@@\n-x\n+y\n*** End Patch\n"
    )
    await apply(ctx, patch)
    assert len(approver.asked) == 1


async def test_patch_inside_the_workspace_runs_unasked(tmp_path: Path) -> None:
    approver = Recording()
    ctx = ctx_for(tmp_path, approver=approver)
    (ctx.workspace / "in.txt").write_text("x\n")
    result = await apply(
        ctx, "*** Begin Patch\n*** Update File: in.txt\n@@\n-x\n+y\n*** End Patch\n"
    )
    assert not result.is_error and not approver.asked
    assert "M in.txt" in result.text


async def test_malformed_patch_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    approver = Recording()
    result = await apply(ctx_for(tmp_path, mode="ask", approver=approver), "not a patch at all")
    assert result.is_error and result.text.startswith("refused: apply_patch:")
    assert not approver.asked
