"""A skill_save change shows in `habakkuk memory history --kind skill` and restore undoes it."""

from __future__ import annotations

import asyncio
import json

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import Provenance
from habakkuk.knowledge.service import Memory
from habakkuk.knowledge.skills.service import Skills
from tests.conftest import WriteConfig, mock_config
from tests.knowledge.skills.conftest import small_scan

AGENT = Provenance(by="agent", session="ses_1", tool="skill_save")


async def save_twice(home: Home) -> None:
    config = load_config(home)
    memory = Memory(home, config, lambda: [])
    try:
        skills = Skills(home.root, config, scan=small_scan, memory=memory)
        await skills.save("main", "tidy-up", "Tidy.", "Version one.", provenance=AGENT)
        await skills.save("main", "tidy-up", "Tidy.", "Version two.", provenance=AGENT)
    finally:
        await memory.close()


def test_memory_history_lists_skill_changes_and_restore_undoes_one(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config())
    asyncio.run(save_twice(home))
    assert main(["memory", "history", "--kind", "skill", "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert [(c["kind"], c["name"], c["path"], c["op"]) for c in changes] == [
        ("skill", "tidy-up", "skills/tidy-up/SKILL.md", "updated"),
        ("skill", "tidy-up", "skills/tidy-up/SKILL.md", "created"),
    ]
    assert main(["memory", "restore", changes[0]["id"]]) == 0
    capsys.readouterr()
    skill_md = home.root / "agents" / "main" / "skills" / "tidy-up" / "SKILL.md"
    assert skill_md.read_text().rstrip().endswith("Version one.")
