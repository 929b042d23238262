"""A write goes where the permission check said, even if a folder is swapped for a link
between the check and the write (here by a tool_before hook: a real process that runs
after the decision and before the tool)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.events import EventBus
from habakkuk.engine.hooks import Hooks
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.store import BlobStore
from habakkuk.engine.toolkit.registry import ToolContext, ToolError, ToolRegistry
from habakkuk.tools.edit import EditFile
from habakkuk.tools.files import ReadFile, WriteFile
from habakkuk.tools.patch_tool import ApplyPatch
from habakkuk.tools.safe_open import open_beneath


@dataclass
class Hook:
    """A config `hooks:` entry."""

    event: str
    command: str
    timeout: float = 10.0
    match: str | None = None


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a real folder sub/ holding a.txt, and a folder outside it."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "a.txt").write_text("inside\n")
    outside.mkdir()
    (outside / "a.txt").write_text("inside\n")  # the same text: a patch would apply to it
    return workspace, outside


def swapping(workspace: Path, target: Path, home: Path) -> ToolRegistry:
    """A registry whose tool_before hook replaces ws/sub with a link to `target`."""
    registry = ToolRegistry()
    for tool in (WriteFile(), EditFile(), ApplyPatch()):
        registry.register(tool)
    swap = f"rm -rf '{workspace}/sub' && ln -s '{target}' '{workspace}/sub'"
    registry.hooks = Hooks([Hook("tool_before", swap)], home)
    return registry


def context(workspace: Path, home: Path, mode: str = "workspace") -> ToolContext:
    return ToolContext(
        agent="main",
        session="ses_1",
        turn="turn_1",
        workspace=workspace,
        mode=mode,
        home=home,
        blobs=BlobStore(home / "blobs"),
        bus=EventBus(),
    )


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "sub/a.txt", "content": "pwned\n"}),
    ("write_file", {"path": "sub/new/b.txt", "content": "pwned\n"}),
    ("edit_file", {"path": "sub/a.txt", "old_string": "side", "new_string": "pwned"}),
    (
        "apply_patch",
        {"patch": "*** Begin Patch\n*** Update File: sub/a.txt\n-inside\n+pwned\n*** End Patch"},
    ),
    ("apply_patch", {"patch": "*** Begin Patch\n*** Add File: sub/c.txt\n+pwned\n*** End Patch"}),
    ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: sub/a.txt\n*** End Patch"}),
]


@pytest.mark.parametrize(
    ("tool", "args"), CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CALLS)]
)
async def test_a_folder_swapped_for_a_link_after_the_check_gets_no_write(
    tmp_path: Path, places: tuple[Path, Path], tool: str, args: dict[str, Any]
) -> None:
    workspace, outside = places
    home = tmp_path / "home"
    home.mkdir()
    ctx = context(workspace, home)  # unattended: the write runs only because it is inside
    result = await swapping(workspace, outside, home).call(
        ToolUseBlock("call_1", tool, args), ctx, {tool}
    )
    assert (workspace / "sub").is_symlink()  # the hook did swap it
    assert result.is_error and "nothing was written" in result.text, result.text
    assert sorted(p.name for p in outside.iterdir()) == ["a.txt"]
    assert (outside / "a.txt").read_text() == "inside\n"


async def test_a_link_swapped_in_to_the_homes_config_gets_no_write(tmp_path: Path) -> None:
    workspace = tmp_path / "user"  # the workspace holds the home
    home = workspace / "hab"
    home.mkdir(parents=True)
    (home / "config.yaml").write_text("mode: workspace\n")
    (workspace / "sub").mkdir()
    ctx = context(workspace, home)
    use = ToolUseBlock("call_1", "write_file", {"path": "sub/config.yaml", "content": "mode: full"})
    result = await swapping(workspace, home, home).call(use, ctx, {"write_file"})
    assert result.is_error and "nothing was written" in result.text
    assert (home / "config.yaml").read_text() == "mode: workspace\n"


async def test_ordinary_writes_still_create_folders_and_keep_modes(
    tmp_path: Path, places: tuple[Path, Path]
) -> None:
    workspace, _ = places
    registry = ToolRegistry()
    registry.register(WriteFile())
    os.chmod(workspace / "sub" / "a.txt", 0o600)
    ctx = context(workspace, tmp_path)
    for path in ("sub/a.txt", "deep/er/b.txt"):
        use = ToolUseBlock("call_1", "write_file", {"path": path, "content": "new\n"})
        assert not (await registry.call(use, ctx, {"write_file"})).is_error
    assert (workspace / "sub" / "a.txt").read_text() == "new\n"
    assert (workspace / "sub" / "a.txt").stat().st_mode & 0o777 == 0o600
    assert (workspace / "deep" / "er" / "b.txt").read_text() == "new\n"
    assert not [p for p in (workspace / "sub").iterdir() if p.name.endswith(".tmp")]


def test_the_walk_never_follows_a_link_below_the_root(places: tuple[Path, Path]) -> None:
    workspace, outside = places
    (workspace / "link").symlink_to(outside)
    with pytest.raises(ToolError, match="no longer a folder"):
        open_beneath(workspace, ["link", "made"], create=True)
    assert not (outside / "made").exists()
    fd = open_beneath(workspace, ["sub", "made"], create=True)
    os.close(fd)
    assert (workspace / "sub" / "made").is_dir()


async def test_a_link_swapped_in_to_a_credential_file_after_the_check_reads_nothing(
    tmp_path: Path,
) -> None:
    """read_file's credential refusal holds for what it opened, not only what it checked."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("SECRET_TOKEN=hunter2\n")
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / ".env").write_text("harmless\n")
    registry = ToolRegistry()
    registry.register(ReadFile())
    swap = f"rm -rf '{workspace}/sub' && ln -s '{home}' '{workspace}/sub'"
    registry.hooks = Hooks([Hook("tool_before", swap)], home)
    use = ToolUseBlock("t1", "read_file", {"path": "sub/.env"})
    result = await registry.call(use, context(workspace, home), {"read_file"})
    assert result.is_error
    assert "credential" in result.text
    assert "hunter2" not in result.text
