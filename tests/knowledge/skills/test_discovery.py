"""Which folders are skills, which win a clash, and which are skipped (and why)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from habakkuk.engine.config import Config
from habakkuk.engine.home import Home
from habakkuk.knowledge.skills.service import Skills

from .conftest import small_scan, write_skill


async def test_own_skill_wins_a_clash_with_a_shared_one(
    skills: Skills, shared: Path, own: Path
) -> None:
    write_skill(shared, "weekly-report", "Shared weekly report.")
    write_skill(own, "weekly-report", "My own weekly report.")
    write_skill(shared, "deploy", "Deploy the site.")
    listed = await skills.list_skills("main")
    assert [(s.name, s.scope, s.description) for s in listed] == [
        ("deploy", "shared", "Deploy the site."),
        ("weekly-report", "own", "My own weekly report."),
    ]
    other = await skills.list_skills("other")
    assert [(s.name, s.scope) for s in other] == [("deploy", "shared"), ("weekly-report", "shared")]


async def test_plugin_skills_are_shared_and_home_skills_win_a_clash(
    home: Home, config: Config, shared: Path, tmp_path: Path
) -> None:
    plugin_dir = tmp_path / "plugins" / "tools" / "skills"
    write_skill(plugin_dir, "lint", "The plugin's lint.")
    write_skill(plugin_dir, "format", "The plugin's format.")
    write_skill(shared, "lint", "The home's lint.")
    config.plugin_skill_dirs.append(("tools", plugin_dir))
    skills = Skills(home.root, config, scan=small_scan)
    listed = {s.name: s for s in await skills.list_skills("main")}
    assert listed["lint"].description == "The home's lint."
    assert listed["lint"].scope == "shared"
    assert listed["format"].scope == "plugin"
    assert listed["format"].plugin == "tools"
    assert listed["format"].source == "plugin:tools"
    assert listed["format"].trusted


async def test_folders_that_are_not_skills_are_skipped_with_a_reason(
    skills: Skills, shared: Path, own: Path
) -> None:
    write_skill(shared, "good", "Fine.")
    write_skill(shared, "Bad_Name", "Upper case.")
    (shared / "empty").mkdir()
    write_skill(shared, "renamed", "Mismatch.", fm_name="other-name")
    (shared / "no-description").mkdir()
    (shared / "no-description" / "SKILL.md").write_text("---\nname: no-description\n---\nx\n")
    (shared / "plain").mkdir()
    (shared / "plain" / "SKILL.md").write_text("Just text, no frontmatter.\n")
    (shared / "linked").mkdir()
    (shared / "elsewhere.md").write_text("---\nname: linked\ndescription: d\n---\nx\n")
    os.symlink(shared / "elsewhere.md", shared / "linked" / "SKILL.md")
    # The store's own entries are neither skills nor skipped.
    for own_entry in (".backups", ".archive"):
        (shared / own_entry).mkdir()
    (shared / ".lock.json").write_text('{"version": 1, "entries": {}}')
    write_skill(own, "UPPER", "Own, bad name.")

    assert [s.name for s in await skills.list_skills("main")] == ["good"]
    reasons = {Path(s.path).name: s.reason for s in await skills.skipped("main")}
    assert set(reasons) == {
        "Bad_Name",
        "empty",
        "renamed",
        "no-description",
        "plain",
        "linked",
        "UPPER",
    }
    assert "does not match" in reasons["Bad_Name"]
    assert reasons["empty"] == "no SKILL.md"
    assert "differs from the folder's name" in reasons["renamed"]
    assert "no description" in reasons["no-description"]
    assert "no frontmatter" in reasons["plain"]
    assert "not a regular file" in reasons["linked"]
    # Without an agent, every agent's own folders are looked at too.
    assert "UPPER" in {Path(s.path).name for s in await skills.skipped()}


async def test_pinned_and_a_folded_description_are_read(skills: Skills, shared: Path) -> None:
    folder = shared / "tidy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: tidy\ndescription: >\n  Tidy the\n  downloads folder.\npinned: true\n---\nGo.\n"
    )
    (listed,) = await skills.list_skills("main")
    assert listed.description == "Tidy the downloads folder."
    assert listed.pinned


async def test_an_edited_skill_md_is_listed_as_edited(skills: Skills, shared: Path) -> None:
    write_skill(shared, "notes", "Old description.")
    assert (await skills.list_skills("main"))[0].description == "Old description."
    path = shared / "notes" / "SKILL.md"
    path.write_text(path.read_text().replace("Old description.", "New and longer description."))
    assert (await skills.list_skills("main"))[0].description == "New and longer description."


async def test_a_warm_listing_of_500_skills_reads_no_skill_md(
    skills: Skills, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(500):
        write_skill(shared, f"skill-{n:03d}", f"Skill number {n}.")
    cold = await skills.list_skills("main")
    assert len(cold) == 500
    from habakkuk.knowledge.skills import discovery

    reads: list[Path] = []
    real = discovery.read_regular

    def counting(path: Path) -> str:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(discovery, "read_regular", counting)
    warm = await skills.list_skills("main")
    assert warm == cold
    assert reads == []
    # One edit re-reads that one file only.
    path = shared / "skill-007" / "SKILL.md"
    path.write_text(path.read_text().replace("number 7.", "number seven."))
    stamp = time.time() + 5
    os.utime(path, (stamp, stamp))
    again = await skills.list_skills("main")
    assert reads == [path]
    assert again[7].description == "Skill number seven."


async def test_an_unquoted_colon_in_the_description_is_read_leniently_with_a_warning(
    skills: Skills, shared: Path
) -> None:
    folder = shared / "triage"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: triage\ndescription: Use when: the user asks, or: when\n  issues pile up\n"
        "pinned: true\nmetadata:\n  version: 2\n---\n\nSort the issues.\n"
    )
    (listed,) = await skills.list_skills("main")
    assert listed.description == "Use when: the user asks, or: when issues pile up"
    assert listed.pinned
    assert listed.warning.startswith("SKILL.md line 3: the frontmatter is not valid YAML (")
    assert "description taken as the text after the colon" in listed.warning
    loaded = await skills.skill("main", "triage")
    assert loaded.body == "Sort the issues." and loaded.summary.warning == listed.warning


@pytest.mark.parametrize(
    ("head", "line"),
    [
        ("name: broken\ndescription: d\n  - a: b: c", 4),  # a nested block YAML refuses
        ("name: broken\nthis line is no key: at all: x", 3),  # not `key: value`
        ("  name: broken\n description: [x", 3),  # a continuation before any key
    ],
)
async def test_a_frontmatter_not_even_the_lenient_reader_reads_is_skipped_naming_the_line(
    skills: Skills, shared: Path, head: str, line: int
) -> None:
    folder = shared / "broken"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{head}\n---\nBody.\n")
    assert await skills.list_skills("main") == []
    (skipped,) = await skills.skipped("main")
    assert skipped.reason.startswith(f"SKILL.md's frontmatter cannot be read: line {line}: ")


async def test_valid_yaml_carries_no_warning(skills: Skills, shared: Path) -> None:
    write_skill(shared, "quoted", '"Use when: the user asks."')
    (listed,) = await skills.list_skills("main")
    assert listed.description == "Use when: the user asks." and listed.warning == ""
