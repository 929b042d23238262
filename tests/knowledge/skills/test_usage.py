"""skills/.usage.json: atomic, and no record lost to another one at the same time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from habakkuk.knowledge.skills.service import Skills
from habakkuk.knowledge.skills.usage import UsageLog

from .conftest import write_skill


async def test_uses_at_the_same_time_are_all_recorded(
    skills: Skills, shared: Path, own: Path
) -> None:
    for n in range(20):
        write_skill(shared, f"shared-{n:02d}")
        write_skill(own, f"own-{n:02d}")
    names = [f"shared-{n:02d}" for n in range(20)] + [f"own-{n:02d}" for n in range(20)]
    await asyncio.gather(*(skills.skill("main", name, record_use=True) for name in names))
    stamps = json.loads((shared / ".usage.json").read_text())
    assert set(stamps) == {f"shared/shared-{n:02d}" for n in range(20)} | {
        f"main/own-{n:02d}" for n in range(20)
    }
    assert not [p for p in shared.iterdir() if p.name.endswith(".tmp")]


def test_an_unreadable_usage_file_counts_as_empty_and_is_replaced(tmp_path: Path) -> None:
    (tmp_path / ".usage.json").write_text("{not json")
    log = UsageLog(tmp_path)
    assert log.read() == {}
    log.record("shared/x", at="2026-11-06T09:12:00Z")
    assert log.read() == {"shared/x": "2026-11-06T09:12:00Z"}
    log.forget("shared/x")
    assert log.read() == {}
