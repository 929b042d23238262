"""The home's own files are never "inside the workspace", even when the workspace holds them.

A user who points `workspace:` at `~` (or at a folder holding $HABAKKUK_HOME) must not
give a workspace-mode agent its own config, .env or auth.json.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.events import EventBus
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.store import BlobStore
from habakkuk.engine.toolkit.home_files import (
    HomeFile,
    home_file,
    knowledge_file,
    workspace_contains_home,
)
from habakkuk.engine.toolkit.registry import ToolContext, ToolRegistry
from habakkuk.tools.edit import EditFile
from habakkuk.tools.files import ListDir, ReadFile, WriteFile
from habakkuk.tools.patch_tool import ApplyPatch
from habakkuk.tools.search_tool import SearchFiles
from tests.engine.test_permissions_matrix import Answering

CONFIG = "agents:\n  main:\n    mode: workspace\n"
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def space(tmp_path: Path) -> Path:
    """A workspace (the user's `~`) that holds the home at hab/."""
    workspace = tmp_path / "user"
    home = workspace / "hab"
    (home / "agents" / "main" / "memory").mkdir(parents=True)
    (home / "channels").mkdir()
    (home / "config.yaml").write_text(CONFIG)
    (home / ".env").write_text(f"ANTHROPIC_API_KEY={SECRET}\n")
    (home / "auth.json").write_text(f'{{"chatgpt": "{SECRET}"}}\n')
    (home / "channels" / "matrix-me.json").write_text(f'{{"token": "{SECRET}"}}\n')
    (workspace / "notes.txt").write_text(f"the key is {SECRET}\n")
    return workspace


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    for tool in (ReadFile(), WriteFile(), EditFile(), ApplyPatch(), SearchFiles(), ListDir()):
        tools.register(tool)
    return tools


def ctx_for(workspace: Path, mode: str, approver: Any = None) -> ToolContext:
    return ToolContext(
        agent="main",
        session="ses_1",
        turn="turn_1",
        workspace=workspace,
        mode=mode,
        home=workspace / "hab",
        blobs=BlobStore(workspace.parent / "blobs"),
        bus=EventBus(),
        approver=approver,
    )


async def call(ctx: ToolContext, tool: str, **args: Any) -> Any:
    return await registry().call(ToolUseBlock("call_1", tool, args), ctx, {tool})


async def test_a_workspace_agent_cannot_raise_its_own_mode_without_approval(space: Path) -> None:
    ctx = ctx_for(space, "workspace")  # unattended: what needs approval is denied
    edit = await call(
        ctx, "edit_file", path="hab/config.yaml", old_string="workspace", new_string="full"
    )
    write = await call(ctx, "write_file", path="hab/config.yaml", content="mode: full\n")
    patch = await call(
        ctx,
        "apply_patch",
        patch="*** Begin Patch\n*** Update File: hab/config.yaml\n-    mode: workspace\n"
        "+    mode: full\n*** End Patch",
    )
    for result in (edit, write, patch):
        assert result.is_error and "nobody can approve" in result.text
    assert (space / "hab" / "config.yaml").read_text() == CONFIG


async def test_writing_the_homes_files_asks_the_human_in_workspace_mode(space: Path) -> None:
    approver = Answering("allow_once")
    ctx = ctx_for(space, "workspace", approver)
    result = await call(ctx, "write_file", path="hab/agents/main/SOUL.md", content="be bold")
    assert not result.is_error and len(approver.asked) == 1
    assert (space / "hab" / "agents" / "main" / "SOUL.md").read_text() == "be bold"


async def test_a_link_in_the_workspace_to_the_homes_config_is_the_config(space: Path) -> None:
    (space / "settings.yaml").symlink_to(space / "hab" / "config.yaml")
    result = await call(ctx_for(space, "workspace"), "write_file", path="settings.yaml", content="")
    assert result.is_error and "nobody can approve" in result.text
    assert (space / "hab" / "config.yaml").read_text() == CONFIG


@pytest.mark.parametrize("name", ["hab/.env", "hab/auth.json", "hab/channels/matrix-me.json"])
@pytest.mark.parametrize("mode", ["read-only", "ask", "workspace"])
async def test_credentials_are_refused_to_reading_tools_below_full_mode(
    space: Path, name: str, mode: str
) -> None:
    approver = Answering("allow_once")
    ctx = ctx_for(space, mode, approver)
    for tool, args in (
        ("read_file", {"path": name}),
        ("search_files", {"pattern": "sk-", "path": name}),
        ("edit_file", {"path": name, "old_string": SECRET, "new_string": "x"}),
    ):
        result = await call(ctx, tool, **args)
        assert result.is_error, result.text
        assert "credential files" in result.text and "only in full mode" in result.text
        assert SECRET not in result.text
    assert not approver.asked


async def test_a_search_of_the_workspace_leaves_out_the_credentials(space: Path) -> None:
    found = await call(ctx_for(space, "workspace"), "search_files", pattern="sk-test", glob="*")
    assert "notes.txt:1:" in found.text
    assert "auth.json" not in found.text and "matrix-me" not in found.text
    full = await call(ctx_for(space, "full"), "search_files", pattern="sk-test")
    assert "hab/auth.json:1:" in full.text


async def test_full_mode_reads_the_credentials_and_config_stays_readable(space: Path) -> None:
    assert SECRET in (await call(ctx_for(space, "full"), "read_file", path="hab/.env")).text
    config = await call(ctx_for(space, "workspace"), "read_file", path="hab/config.yaml")
    assert not config.is_error and "mode: workspace" in config.text


async def test_the_agents_memory_is_written_only_by_its_tools_in_workspace_mode(
    space: Path,
) -> None:
    # It was writable by the file tools, which let a key past memory_save's secret check.
    approver = Answering("allow_once")
    ctx = ctx_for(space, "workspace", approver)
    note = await call(ctx, "write_file", path="hab/agents/main/memory/tea.md", content="green")
    profile = await call(ctx, "write_file", path="hab/agents/main/USER.md", content="## Name\n")
    other = await call(ctx, "write_file", path="hab/agents/other/memory/x.md", content="")
    assert "use memory_save" in note.text and "use memory_save" in other.text
    assert "use user_profile_update" in profile.text
    assert all(r.is_error for r in (note, profile, other)) and not approver.asked
    assert not (space / "hab" / "agents" / "main" / "memory" / "tea.md").exists()


def test_the_default_workspace_inside_the_home_is_the_agents_own(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace = home / "agents" / "main" / "workspace"
    workspace.mkdir(parents=True)
    assert home_file(workspace / "a.txt", home, workspace=workspace, agent="main") is None
    assert home_file(workspace / ".env", home, workspace=workspace, agent="main") is None
    assert home_file(home / ".env", home, workspace=workspace, agent="main") is HomeFile.CREDENTIAL
    assert home_file(home / "control.db", home, workspace=workspace, agent="main") is (
        HomeFile.STATE
    )
    assert not workspace_contains_home(workspace, home)


def test_workspace_contains_home_follows_links(tmp_path: Path) -> None:
    (tmp_path / "user" / "data" / "hab").mkdir(parents=True)
    os.symlink(tmp_path / "user" / "data", tmp_path / "linked")
    assert workspace_contains_home(tmp_path / "user", tmp_path / "linked" / "hab")
    assert workspace_contains_home(tmp_path / "user", tmp_path / "user")
    assert not workspace_contains_home(tmp_path / "user" / "data", tmp_path / "user")


@pytest.mark.parametrize(
    ("rel", "tool"),
    [
        ("agents/main/memory/tea.md", "memory_save"),
        ("agents/other/memory/deep/new/x.md", "memory_save"),
        ("agents/main/skills/deploy/SKILL.md", "skill_save"),
        ("agents/main/skills/deploy/run.sh", "skill_save"),
        ("skills/helper/SKILL.md", "skill_save"),
        ("skills/.lock.json", "skill_save"),
        ("agents/main/USER.md", "user_profile_update"),
        ("agents/main/IDENTITY.md", "set_identity"),
        ("Agents/main/Memory/x.md", "memory_save"),
        ("agents/main/Skills/x/skill.md", "skill_save"),
    ],
)
def test_memory_and_skills_files_name_the_tool_that_writes_them(
    tmp_path: Path, rel: str, tool: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "agents" / "main" / "workspace"
    owned = knowledge_file(home / rel, home)
    assert owned is not None and owned.tool == tool
    assert home_file(home / rel, home, workspace=workspace, agent="main") is HomeFile.KNOWLEDGE


@pytest.mark.parametrize(
    "rel", ["agents/main/SOUL.md", "agents/main/workspace/memory/x.md", "config.yaml", "x/skills"]
)
def test_other_home_files_are_not_memory_or_skills(tmp_path: Path, rel: str) -> None:
    assert knowledge_file(tmp_path / rel, tmp_path) is None
    assert knowledge_file(tmp_path.parent / "elsewhere" / "skills" / "x", tmp_path) is None
