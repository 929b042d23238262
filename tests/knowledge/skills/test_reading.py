"""Reading skills: one skill, its supporting files (safely), search, the snapshot, trust."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import read_lock
from habakkuk.knowledge.skills.service import Skills
from habakkuk.knowledge.skills.types import UNTRUSTED_CAUTION, NeedsAcknowledgement

from .conftest import DANGEROUS_FINDINGS, install, write_skill


async def test_a_skill_comes_with_its_body_and_supporting_files(
    skills: Skills, shared: Path
) -> None:
    folder = write_skill(shared, "weekly-report", "Write the weekly report.", body="1. Read.")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "collect.py").write_text("print('hi')\n")
    (folder / "template.md").write_text("# Week\n")
    (folder / "SKILL.md.bak").write_text("old\n")
    skill = await skills.skill("main", "weekly-report")
    assert skill.body == "1. Read."
    assert skill.files == ("scripts/collect.py", "template.md")
    assert skill.caution == ""
    assert skill.summary.source == "hand"
    assert skill.summary.trusted


async def test_an_unknown_skill_is_not_found_with_close_names(skills: Skills, shared: Path) -> None:
    write_skill(shared, "weekly-report")
    with pytest.raises(NotFound, match="no skill named 'weekly-reprot'; did you mean: weekly"):
        await skills.skill("main", "weekly-reprot")
    with pytest.raises(NotFound, match="agent 'ghost' is not configured"):
        await skills.list_skills("ghost")


async def test_another_agents_own_skills_are_out_of_reach(skills: Skills, home: Home) -> None:
    write_skill(home.root / "agents" / "other" / "skills", "secret-plan")
    with pytest.raises(NotFound):
        await skills.skill("main", "secret-plan")
    assert (await skills.skill("other", "secret-plan")).summary.scope == "own"


async def test_using_a_skill_records_when(skills: Skills, shared: Path, own: Path) -> None:
    write_skill(shared, "shared-one")
    write_skill(own, "mine")
    assert (await skills.skill("main", "mine")).summary.last_used is None
    used = await skills.skill("main", "mine", record_use=True)
    await skills.skill("main", "shared-one", record_use=True)
    assert used.summary.last_used
    listed = {s.name: s.last_used for s in await skills.list_skills("main")}
    assert listed["mine"] == used.summary.last_used
    import json

    stamps = json.loads((shared / ".usage.json").read_text())
    assert set(stamps) == {"main/mine", "shared/shared-one"}


async def test_an_installed_skill_is_untrusted_until_approved(
    skills: Skills, shared: Path, home: Home
) -> None:
    write_skill(shared, "fetcher", "Fetch things.")
    install(home, "fetcher", verdict="caution")
    skill = await skills.skill("main", "fetcher")
    assert not skill.summary.trusted
    assert skill.summary.verdict == "caution"
    assert skill.summary.source == "github:acme/skills/fetcher@main"
    assert skill.caution == UNTRUSTED_CAUTION.format(
        source="github:acme/skills/fetcher@main", name="fetcher"
    )
    approved = await skills.approve("fetcher")
    assert approved.trusted
    again = await skills.skill("main", "fetcher")
    assert again.summary.trusted and again.caution == ""


async def test_a_dangerous_skill_needs_acknowledgement_and_carries_every_finding(
    skills: Skills, shared: Path, home: Home
) -> None:
    write_skill(shared, "setup-helper", "Set the machine up.")
    install(home, "setup-helper", verdict="dangerous", findings=DANGEROUS_FINDINGS)
    listed = {s.name: s for s in await skills.list_skills("main")}["setup-helper"]
    assert listed.findings == DANGEROUS_FINDINGS
    assert listed.reasons == [
        "scripts/setup.sh:2: a download is piped into a shell",
        "SKILL.md:4: fetches a URL",
    ]
    assert listed.needs_acknowledgement
    with pytest.raises(NeedsAcknowledgement) as refused:
        await skills.approve("setup-helper")
    assert refused.value.skill.findings == DANGEROUS_FINDINGS
    assert "found it dangerous (2 findings)" in str(refused.value)
    entries, _ = read_lock(shared)
    assert entries["setup-helper"].approved is False  # nothing changed
    approved = await skills.approve("setup-helper", acknowledged=True)
    assert approved.trusted and not approved.needs_acknowledgement
    # Approved already: approving again changes nothing and needs nothing.
    assert (await skills.approve("setup-helper")).trusted


async def test_a_caution_skill_is_approved_without_acknowledgement(
    skills: Skills, shared: Path, home: Home
) -> None:
    write_skill(shared, "fetcher", "Fetch things.")
    install(home, "fetcher", verdict="caution", findings=DANGEROUS_FINDINGS[:1])
    assert (await skills.approve("fetcher")).trusted


async def test_approving_what_was_not_installed_says_why(skills: Skills, shared: Path) -> None:
    write_skill(shared, "handmade")
    with pytest.raises(HabakkukError, match=r"made by hand.*needs no approval"):
        await skills.approve("handmade")
    with pytest.raises(NotFound, match="no installed skill 'nothing'"):
        await skills.approve("nothing")


async def test_a_supporting_file_is_read_as_text(skills: Skills, shared: Path) -> None:
    folder = write_skill(shared, "report")
    (folder / "docs").mkdir()
    (folder / "docs" / "how.md").write_text("Step one.\n")
    assert await skills.read_file("main", "report", "docs/how.md") == "Step one.\n"
    assert await skills.read_file("main", "report", "./docs/how.md") == "Step one.\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../other/SKILL.md", r"leads out of the skill's folder"),
        ("docs/../../x", r"leads out of the skill's folder"),
        ("/etc/passwd", r"is absolute"),
        ("", r"give the path"),
        ("SKILL.md.bak", r"previous version"),
        ("missing.md", r"no such file"),
    ],
)
async def test_paths_out_of_the_folder_are_refused(
    skills: Skills, shared: Path, path: str, message: str
) -> None:
    folder = write_skill(shared, "report")
    (folder / "SKILL.md.bak").write_text("old\n")
    with pytest.raises(HabakkukError, match=message):
        await skills.read_file("main", "report", path)


async def test_symlinks_leading_out_are_refused_at_every_step(
    skills: Skills, shared: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret\n")
    folder = write_skill(shared, "report")
    os.symlink(outside / "secret.txt", folder / "link.txt")
    os.symlink(outside, folder / "linked-dir")
    with pytest.raises(HabakkukError, match="symbolic link"):
        await skills.read_file("main", "report", "link.txt")
    with pytest.raises(HabakkukError, match="symbolic link"):
        await skills.read_file("main", "report", "linked-dir/secret.txt")


async def test_large_and_binary_files_are_refused_in_one_line(skills: Skills, shared: Path) -> None:
    folder = write_skill(shared, "report")
    (folder / "big.txt").write_text("x" * (256 * 1024 + 1))
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(HabakkukError, match="at most 256 KB"):
        await skills.read_file("main", "report", "big.txt")
    with pytest.raises(HabakkukError, match="binary file"):
        await skills.read_file("main", "report", "image.png")


async def test_search_ranks_name_hits_before_description_hits(skills: Skills, shared: Path) -> None:
    write_skill(shared, "weekly-report", "Write the report from the board.")
    write_skill(shared, "deploy", "Deploy the site; then write a short weekly note.")
    write_skill(shared, "coffee", "Order coffee.")
    found = await skills.search("main", "weekly")
    assert [s.name for s in found] == ["weekly-report", "deploy"]
    assert [s.name for s in await skills.search("main", "Report board")] == ["weekly-report"]
    assert await skills.search("main", "nothing-like-it") == []
    with pytest.raises(HabakkukError, match="no words"):
        await skills.search("main", "  ?! ")


async def test_the_snapshot_is_cut_at_100_skills_and_8_kb(skills: Skills, shared: Path) -> None:
    for n in range(150):
        write_skill(shared, f"skill-{n:03d}", f"Skill {n}.")
    snap = await skills.snapshot("main")
    assert len(snap.skills) == 100
    assert snap.missing == 50
    assert [s.name for s in snap.skills] == sorted(s.name for s in snap.skills)


async def test_the_snapshot_stops_at_8_kb_of_long_descriptions(
    skills: Skills, shared: Path
) -> None:
    for n in range(40):
        write_skill(shared, f"long-{n:02d}", "word " * 100)
    snap = await skills.snapshot("main")
    lines = sum(len(f"- {s.name}: {s.description}".encode()) + 1 for s in snap.skills)
    assert lines <= 8192
    assert snap.missing == 40 - len(snap.skills) > 0


async def test_an_explicitly_named_skill_loads_among_500(skills: Skills, shared: Path) -> None:
    for n in range(500):
        write_skill(shared, f"skill-{n:03d}", f"Skill {n}.", body=f"Steps of skill {n}.")
    snap = await skills.snapshot("main")
    assert "skill-499" not in {s.name for s in snap.skills}
    message = await skills.invocation("main", "skill-499", "now")
    assert "Steps of skill 499." in message and message.endswith("Request: now")
    assert (await skills.skill("main", "skill-499")).body == "Steps of skill 499."
    assert (await skills.search("main", "skill-499"))[0].name == "skill-499"


async def test_findings_a_lock_file_holds_in_another_shape_still_show(
    skills: Skills, shared: Path, home: Home
) -> None:
    write_skill(shared, "odd", "An odd lock entry.")
    install(home, "odd", verdict="dangerous")
    lock = shared / ".lock.json"
    data = json.loads(lock.read_text(encoding="utf-8"))
    data["entries"]["odd"]["findings"] = [
        "curl x | sh in run.sh",
        {"severity": "fatal", "file": "run.sh", "line": "7", "message": "pipes to a shell"},
    ]
    lock.write_text(json.dumps(data), encoding="utf-8")
    [summary] = [s for s in await skills.list_skills("main") if s.name == "odd"]
    assert summary.reasons == ["?: curl x | sh in run.sh", "run.sh: pipes to a shell"]
    assert summary.needs_acknowledgement
