"""Removing and restoring skills through skills/.backups, lock entries included."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import read_lock
from habakkuk.knowledge.skills.service import Skills

from .conftest import install, small_scan, write_skill


async def test_an_own_skill_goes_back_to_its_agent(skills: Skills, own: Path, home: Home) -> None:
    folder = write_skill(own, "mine", "Mine.")
    (folder / "notes.txt").write_text("keep me\n")
    removed = await skills.remove("main", "mine")
    assert not folder.exists()
    assert removed.name == "mine"
    assert (home.root / "skills" / ".backups" / removed.backup / "files" / "notes.txt").is_file()
    with pytest.raises(NotFound):
        await skills.skill("main", "mine")
    restored = await skills.restore("main", "mine")
    assert restored.scope == "own"
    assert (folder / "notes.txt").read_text() == "keep me\n"
    # The other agent cannot restore main's own skill.
    await skills.remove("main", "mine")
    with pytest.raises(NotFound, match="no backup"):
        await skills.restore("other", "mine")


async def test_removing_an_installed_skill_drops_its_lock_entry_and_restore_puts_it_back(
    skills: Skills, shared: Path, home: Home
) -> None:
    write_skill(shared, "fetcher")
    install(home, "fetcher", approved=True)
    await skills.remove("main", "fetcher")
    assert "fetcher" not in read_lock(shared)[0]
    restored = await skills.restore("main", "fetcher")
    entry = read_lock(shared)[0]["fetcher"]
    assert entry.approved and entry.source == "github:acme/skills/fetcher@main"
    assert restored.trusted and restored.source == entry.source


async def test_restoring_over_a_skill_backs_up_the_current_one_first(
    skills: Skills, own: Path
) -> None:
    write_skill(own, "mine", "First.")
    await skills.remove("main", "mine")
    write_skill(own, "mine", "Second.")
    assert (await skills.restore("main", "mine")).description == "First."
    assert (await skills.restore("main", "mine")).description == "Second."


async def test_a_plugin_skill_cannot_be_removed_alone(
    home: Home, config: Config, tmp_path: Path
) -> None:
    plugin_dir = tmp_path / "p" / "skills"
    write_skill(plugin_dir, "lint")
    config.plugin_skill_dirs.append(("tools", plugin_dir))
    skills = Skills(home.root, config, scan=small_scan)
    with pytest.raises(HabakkukError, match="comes with the plugin tools"):
        await skills.remove("main", "lint")
    assert (plugin_dir / "lint" / "SKILL.md").is_file()
