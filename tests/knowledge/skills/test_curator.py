"""The curator on a real home: merges, archives, pinned skills, dry runs, restores, the
schedule and `serve`'s maintenance task."""

from __future__ import annotations

import datetime as dt
import json
import os
from argparse import Namespace
from pathlib import Path

import pytest

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.backups import newest, put_back
from habakkuk.knowledge.memory_types import ChangeKind, Provenance
from habakkuk.knowledge.service import Memory
from habakkuk.knowledge.skills.curator import curate, curate_command, is_due, last_run
from habakkuk.knowledge.skills.curator_loop import curate_when_due
from habakkuk.knowledge.skills.service import Skills
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import eventually
from tests.knowledge.skills.conftest import small_scan

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
RECENT = NOW - dt.timedelta(days=2)


def make_config(home: Home, curate_setting: str = "off", days: int = 90) -> Config:
    text = (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n  other:\n    model: mock/scripted\n"
        f'skills:\n  curate: "{curate_setting}"\n  archive_after_days: {days}\n'
    )
    home.config_path.write_text(text, encoding="utf-8")
    return parse_config(text, home.config_path, home)


def write_skill(
    folder: Path,
    name: str,
    description: str,
    body: str,
    *,
    files: dict[str, str] | None = None,
    pinned: bool = False,
    changed: dt.datetime = RECENT,
) -> Path:
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    pin = "pinned: true\n" if pinned else ""
    (path / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n{pin}---\n\n{body}\n", encoding="utf-8"
    )
    for relative, text in (files or {}).items():
        (path / relative).parent.mkdir(parents=True, exist_ok=True)
        (path / relative).write_text(text, encoding="utf-8")
    stamp = changed.timestamp()
    os.utime(path / "SKILL.md", (stamp, stamp))
    return path


def own(home: Home, agent: str = "main") -> Path:
    return home.agent_dir(agent) / "skills"


def used(home: Home, **stamps: dt.datetime) -> None:
    """Write skills/.usage.json: main's own skills last loaded at these times."""
    folder = home.root / "skills"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        f"main/{k.replace('_', '-')}": v.strftime("%Y-%m-%dT%H:%M:%SZ") for k, v in stamps.items()
    }
    (folder / ".usage.json").write_text(json.dumps(data), encoding="utf-8")


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def without_curator_state(files: dict[str, bytes]) -> dict[str, bytes]:
    """A tree without what every real run writes: .curator.json and its lock file."""
    return {k: v for k, v in files.items() if k not in CURATOR_STATE}


CURATOR_STATE = ("skills/.curator.json", "skills/.curator.lock")


@pytest.fixture
def config(home: Home) -> Config:
    return make_config(home)


async def test_the_same_body_merges_into_the_more_recently_used(home: Home, config: Config) -> None:
    write_skill(own(home), "deploy", "Ship the site to production.", "1. Build\n2.  Ship")
    write_skill(
        own(home),
        "release",
        "Cut a release of the app.",
        "1. Build\n\n2. Ship",
        files={"scripts/check.sh": "echo ok\n"},
    )
    used(home, deploy=NOW - dt.timedelta(days=10), release=NOW - dt.timedelta(days=1))

    run = await curate(home, config, now=NOW, force=True)

    [change] = run.changes
    assert (change.action, change.name, change.into, change.reason) == (
        "merge",
        "deploy",
        "release",
        "same body",
    )
    assert not (own(home) / "deploy").exists()
    text = (own(home) / "release" / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\nname: release\ndescription: Cut a release of the app.\n---")
    assert "## Merged from deploy" in text
    assert text.index("## Merged from deploy") > text.index("1. Build\n\n2. Ship")
    assert (own(home) / "release" / "scripts" / "check.sh").read_text() == "echo ok\n"
    assert change.backup.startswith("deploy/")


async def test_names_equal_but_for_a_plural_merge(home: Home, config: Config) -> None:
    write_skill(
        own(home),
        "report",
        "Weekly numbers for the board.",
        "Old steps.",
        files={"template.md": "# T\n"},
        changed=RECENT - dt.timedelta(days=1),
    )
    write_skill(own(home), "reports", "Summaries of incidents.", "New steps.")

    run = await curate(home, config, now=NOW, force=True)

    assert [(c.name, c.into, c.reason) for c in run.changes] == [
        ("report", "reports", "plural name")
    ]
    keeper = own(home) / "reports"
    text = (keeper / "SKILL.md").read_text(encoding="utf-8")
    assert "New steps." in text and "## Merged from report\n" in text and "Old steps." in text
    assert (keeper / "merged" / "report" / "template.md").read_text() == "# T\n"
    assert not (own(home) / "report").exists()


async def test_descriptions_sharing_most_words_merge(home: Home, config: Config) -> None:
    write_skill(own(home), "weekly", "Write the weekly report from the board and sessions.", "A.")
    write_skill(
        own(home),
        "digest",
        "Write a weekly report from the board, sessions and notes.",
        "B.",
        changed=RECENT - dt.timedelta(days=1),
    )

    run = await curate(home, config, now=NOW, force=True)

    assert [(c.name, c.into, c.reason) for c in run.changes] == [
        ("digest", "weekly", "similar description")
    ]


async def test_near_misses_are_left_alone(home: Home, config: Config) -> None:
    write_skill(own(home), "report", "Weekly numbers for the board.", "Steps one.")
    write_skill(own(home), "reporter", "Interview people for the newsletter.", "Steps two.")
    write_skill(own(home), "monthly", "Write the monthly report from the board and invoices.", "x")
    write_skill(own(home), "weekly", "Write the weekly report from the board.", "y")
    before = tree(home.root)

    run = await curate(home, config, now=NOW, force=True)

    assert run.changes == () and run.ran
    assert without_curator_state(tree(home.root)) == before


async def test_a_loaded_skill_keeps_its_place_over_a_newer_unused_one(
    home: Home, config: Config
) -> None:
    write_skill(
        own(home),
        "fix",
        "Repair a broken build.",
        "Loaded steps.",
        changed=NOW - dt.timedelta(days=30),
    )
    write_skill(own(home), "fixes", "Patch the flaky tests.", "Fresh steps.")
    used(home, fix=NOW - dt.timedelta(days=20))

    run = await curate(home, config, now=NOW, force=True)

    assert [(c.name, c.into) for c in run.changes] == [("fixes", "fix")]
    assert "Fresh steps." in (own(home) / "fix" / "SKILL.md").read_text(encoding="utf-8")


async def test_pinned_skills_are_never_touched(home: Home, config: Config) -> None:
    write_skill(own(home), "policy", "Expense rules.", "Pinned.", pinned=True)
    write_skill(own(home), "policies", "Expense rules.", "Pinned.")
    write_skill(
        own(home),
        "ancient",
        "Kept forever.",
        "Old.",
        pinned=True,
        changed=NOW - dt.timedelta(days=400),
    )
    before = tree(own(home))

    run = await curate(home, config, now=NOW, force=True)

    assert run.changes == ()
    assert tree(own(home)) == before


async def test_skills_unused_for_the_archive_age_are_archived(home: Home) -> None:
    config = make_config(home, days=30)
    write_skill(own(home), "stale-loaded", "Loaded long ago.", "A.", changed=RECENT)
    write_skill(
        own(home), "stale-never", "Never loaded.", "B.", changed=NOW - dt.timedelta(days=31)
    )
    write_skill(
        own(home), "fresh-never", "Never loaded, new.", "C.", changed=NOW - dt.timedelta(days=29)
    )
    used(home, stale_loaded=NOW - dt.timedelta(days=31))

    run = await curate(home, config, now=NOW, force=True)

    assert sorted((c.action, c.name) for c in run.changes) == [
        ("archive", "stale-loaded"),
        ("archive", "stale-never"),
    ]
    assert sorted(p.name for p in own(home).iterdir()) == ["fresh-never"]
    assert all(c.backup for c in run.changes)


async def test_only_agents_own_skills_are_curated(home: Home, config: Config) -> None:
    shared = home.root / "skills"
    write_skill(shared, "report", "Shared.", "Same.", changed=NOW - dt.timedelta(days=400))
    write_skill(shared, "reports", "Shared.", "Same.", changed=NOW - dt.timedelta(days=400))
    write_skill(own(home, "main"), "notes", "Main's.", "Same body.")
    write_skill(own(home, "other"), "note", "Other's.", "Same body.")
    before = tree(home.root)

    run = await curate(home, config, now=NOW, force=True)

    assert run.changes == ()
    assert without_curator_state(tree(home.root)) == before


async def test_a_dry_run_changes_nothing_on_disk(home: Home) -> None:
    config = make_config(home, days=30)
    write_skill(own(home), "report", "A.", "Same.", files={"a.txt": "a"})
    write_skill(own(home), "reports", "B.", "Same.")
    write_skill(own(home), "old", "Old one.", "Old.", changed=NOW - dt.timedelta(days=60))
    before = tree(home.root)

    run = await curate(home, config, now=NOW, force=True, dry_run=True)

    assert run.dry_run
    assert sorted((c.action, c.name) for c in run.changes) == [
        ("archive", "old"),
        ("merge", "report"),
    ]
    assert all(c.backup == "" for c in run.changes)
    assert tree(home.root) == before
    assert not (home.root / "skills").exists()


async def test_restore_brings_back_merged_and_archived_skills_exactly(
    home: Home, memory: Memory
) -> None:
    config = make_config(home, days=30)
    write_skill(
        own(home),
        "report",
        "A.",
        "Same.",
        files={"data/a.txt": "a"},
        changed=RECENT - dt.timedelta(days=1),
    )
    write_skill(own(home), "reports", "B.", "Same.", files={"b.txt": "b"})
    write_skill(
        own(home),
        "old",
        "Old one.",
        "Old.",
        files={"x.py": "print(1)\n"},
        changed=NOW - dt.timedelta(days=60),
    )
    originals = {name: tree(own(home) / name) for name in ("report", "reports", "old")}
    skills = Skills(home.root, config, scan=small_scan, memory=memory)

    run = await curate(home, config, now=NOW, force=True, memory=memory)
    assert sorted((c.action, c.name) for c in run.changes) == [
        ("archive", "old"),
        ("merge", "report"),
    ]
    assert [s.name for s in await skills.list_skills("main")] == ["reports"]

    for name in ("report", "old", "reports"):  # the keeper goes back to before the merge
        await skills.restore("main", name)
        assert tree(own(home) / name) == originals[name]
    assert [s.name for s in await skills.list_skills("main")] == ["old", "report", "reports"]


async def test_the_memory_history_shows_the_curators_changes(
    home: Home, memory: Memory, config: Config
) -> None:
    write_skill(own(home), "report", "A.", "Same.", changed=RECENT - dt.timedelta(days=1))
    write_skill(own(home), "reports", "B.", "Same.")

    await curate(home, config, now=NOW, force=True, memory=memory)

    changes = await memory.history("main", kind="skill")
    assert {(c.name, c.op, c.by) for c in changes} == {
        ("reports", "updated", "curator"),
        ("report", "deleted", "curator"),
    }
    assert all("merged report into reports" in c.note for c in changes)


async def test_the_last_run_is_recorded_and_decides_when_it_is_due(home: Home) -> None:
    config = make_config(home, "weekly")
    write_skill(own(home), "report", "A.", "Same.")
    write_skill(own(home), "reports", "B.", "Same.")

    first = await curate(home, config, now=NOW)
    assert first.ran and first.due and len(first.changes) == 1
    assert last_run(home) == NOW
    data = json.loads((home.root / "skills" / ".curator.json").read_text(encoding="utf-8"))
    assert data["at"] == "2026-12-01T12:00:00Z"
    assert [c["name"] for c in data["changes"]] == ["report"]

    write_skill(own(home), "fix", "C.", "Twin.")
    write_skill(own(home), "fixes", "D.", "Twin.")
    later = await curate(home, config, now=NOW + dt.timedelta(days=6))
    assert not later.ran and later.changes == ()
    assert (own(home) / "fix").exists()
    due = await curate(home, config, now=NOW + dt.timedelta(days=7))
    assert due.ran and [c.name for c in due.changes] == ["fix"]


@pytest.mark.parametrize(
    ("setting", "not_yet", "due"),
    [("daily", 0.9, 1), ("weekly", 6.9, 7), ("monthly", 29.9, 30)],
)
def test_due_per_setting(home: Home, setting: str, not_yet: float, due: float) -> None:
    config = make_config(home, setting)
    assert is_due(config, None, NOW)
    assert not is_due(config, NOW - dt.timedelta(days=not_yet), NOW)
    assert is_due(config, NOW - dt.timedelta(days=due), NOW)


def test_off_is_never_due(home: Home) -> None:
    config = make_config(home, "off")
    assert not is_due(config, None, NOW)
    assert not is_due(config, NOW - dt.timedelta(days=3650), NOW)


async def test_off_curates_only_when_asked(home: Home, config: Config) -> None:
    write_skill(own(home), "report", "A.", "Same.")
    write_skill(own(home), "reports", "B.", "Same.")
    assert not (await curate(home, config, now=NOW)).ran
    assert (own(home) / "report").exists()
    asked = await curate(home, config, now=NOW, force=True)
    assert asked.ran and not asked.due and len(asked.changes) == 1


async def test_the_command_prints_text_or_json(home: Home, config: Config) -> None:
    write_skill(own(home), "report", "A.", "Same.")
    write_skill(own(home), "reports", "B.", "Same.")
    lines: list[str] = []

    code = await curate_command(
        Namespace(dry_run=True, json=True), home=home, config=config, out=lines.append
    )
    assert code == 0
    shown = json.loads(lines[-1])
    assert shown["dry_run"] is True
    assert shown["changes"][0] | {"backup": ""} == {
        "action": "merge",
        "agent": "main",
        "name": "report",
        "into": "reports",
        "reason": "same body",
        "backup": "",
    }
    code = await curate_command(
        Namespace(dry_run=False, json=False), home=home, config=config, out=lines.append
    )
    assert code == 0
    assert (
        "merge main/report into reports (same body); backup: skills/.backups/report/" in lines[-1]
    )
    assert "habakkuk skills restore NAME" in lines[-1]


async def test_the_maintenance_task_curates_when_due(home: Home) -> None:
    config = make_config(home, "daily")
    write_skill(own(home), "report", "A.", "Same.")
    write_skill(own(home), "reports", "B.", "Same.")
    import asyncio

    task = asyncio.create_task(curate_when_due(home, lambda: config, interval=3600))
    try:
        await eventually(lambda: last_run(home) is not None, what="the run's .curator.json")
        assert not (own(home) / "report").exists()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_serve_maintenance_runs_the_curator(runtime_factory: OpenRuntime, home: Home) -> None:
    write_skill(own(home), "report", "A.", "Same.")
    write_skill(own(home), "reports", "B.", "Same.")
    runtime = await runtime_factory(mock_config(extra="skills:\n  curate: weekly\n"))
    runtime.start_workers(channels=False, maintenance=True)
    await eventually(
        lambda: (home.root / "skills" / ".curator.json").exists(), what=".curator.json"
    )
    assert not (own(home) / "report").exists()

    async def recorded() -> bool:
        changes = await runtime.memory.history("main", kind="skill")
        return {(c.name, c.by) for c in changes} == {("report", "curator"), ("reports", "curator")}

    await eventually(recorded, what="the curator's changes in the memory history")


async def test_a_restored_archived_skill_is_not_archived_again(home: Home) -> None:
    config = make_config(home, days=30)
    write_skill(own(home), "old", "Loaded long ago.", "Old.")
    used(home, old=NOW - dt.timedelta(days=40))

    first = await curate(home, config, now=NOW, force=True)
    assert [c.name for c in first.changes] == ["old"]
    put_back(newest(home.root / "skills", "old"), home.root)

    again = await curate(home, config, now=dt.datetime.now(dt.UTC), force=True)
    assert again.changes == ()
    assert (own(home) / "old" / "SKILL.md").exists()


async def test_a_change_that_fails_is_reported_and_the_others_go_on(home: Home) -> None:
    config = make_config(home, days=30)
    write_skill(own(home), "report", "A.", "Same.", files={"data.txt": "d"})
    write_skill(own(home), "reports", "B.", "Same.")
    (own(home) / "report" / "link").symlink_to(home.root)  # backups refuse links
    write_skill(own(home), "old", "Old one.", "Old.", changed=NOW - dt.timedelta(days=60))
    report_before = tree(own(home) / "report")
    keeper_before = tree(own(home) / "reports")

    run = await curate(home, config, now=NOW, force=True)

    assert [(c.action, c.name) for c in run.changes] == [("archive", "old")]
    assert len(run.errors) == 1 and "merging main/report" in run.errors[0]
    assert tree(own(home) / "report") == report_before
    assert tree(own(home) / "reports") == keeper_before


class HistoryLog:
    """Collects what the curator records (the MemoryAccess.record_change call)."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, ChangeKind, str, str, bool, bool, Provenance]] = []

    async def record_change(
        self,
        agent: str,
        kind: ChangeKind,
        name: str,
        path: str,
        before: str | None,
        after: str | None,
        provenance: Provenance,
    ) -> None:
        self.changes.append((agent, kind, name, path, before is None, after is None, provenance))


async def test_every_change_is_recorded_in_the_agents_history_by_the_curator(
    home: Home,
) -> None:
    config = make_config(home, days=30)
    write_skill(own(home), "report", "A.", "Same.", changed=RECENT - dt.timedelta(days=1))
    write_skill(own(home), "reports", "B.", "Same.")
    write_skill(own(home, "other"), "old", "Old.", "Old.", changed=NOW - dt.timedelta(days=60))
    history = HistoryLog()

    await curate(home, config, now=NOW, force=True, memory=history)

    assert [c[:6] for c in history.changes] == [
        ("main", "skill", "reports", "skills/reports/SKILL.md", False, False),
        ("main", "skill", "report", "skills/report/SKILL.md", False, True),
        ("other", "skill", "old", "skills/old/SKILL.md", False, True),
    ]
    assert {c[6].by for c in history.changes} == {"curator"}


async def test_a_second_run_at_once_is_refused_with_one_line(home: Home, config: Config) -> None:
    import fcntl

    from habakkuk.engine.errors import HabakkukError

    folder = home.root / "skills"
    folder.mkdir()
    with open(folder / ".curator.lock", "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(HabakkukError, match="another curator run is in progress"):
            await curate(home, config, now=NOW, force=True)
