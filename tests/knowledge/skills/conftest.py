"""A skills service on the test home (agents `main` and `other`), with a small scan."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from habakkuk.engine.config import Config
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import LockEntry, write_lock
from habakkuk.knowledge.service import Memory
from habakkuk.knowledge.skills.service import Skills
from habakkuk.knowledge.skills.types import Finding, ScanReport


def small_scan(files: Mapping[str, bytes]) -> ScanReport:
    """A real (if tiny) scan: a download piped into a shell is dangerous."""
    findings = tuple(
        Finding("dangerous", "pipe-to-shell", name, n, "a download is piped into a shell")
        for name, data in files.items()
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1)
        if "curl" in line and "| sh" in line
    )
    return ScanReport("dangerous" if findings else "clean", findings, len(files))


def write_skill(
    root: Path, name: str, description: str = "", body: str = "Do the thing.", **meta: object
) -> Path:
    """HOME-relative skills folder `root`/<name>/SKILL.md with the given frontmatter."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["---", f"name: {meta.pop('fm_name', name)}"]
    lines.append(f"description: {description or f'How to {name}.'}")
    lines += [f"{k}: {v}" for k, v in meta.items()]
    lines += ["---", "", body, ""]
    (folder / "SKILL.md").write_text("\n".join(lines), encoding="utf-8")
    return folder


def install(
    home: Home,
    name: str,
    *,
    approved: bool = False,
    verdict: str = "clean",
    findings: tuple[Finding, ...] = (),
) -> None:
    """Record `name` (already in HOME/skills) as installed in skills/.lock.json, with the
    scan's verdict and findings as an install records them."""
    from habakkuk.knowledge.hub.lock import read_lock

    entries, _ = read_lock(home.root / "skills")
    entries[name] = LockEntry(
        name=name,
        source=f"github:acme/skills/{name}@main",
        kind="github",
        verdict=verdict,
        findings=[f.as_json() for f in findings],
        approved=approved,
    )
    write_lock(home.root / "skills", entries)


@pytest.fixture
def shared(home: Home) -> Path:
    return home.root / "skills"


@pytest.fixture
def own(home: Home) -> Path:
    return home.root / "agents" / "main" / "skills"


@pytest.fixture
def skills(home: Home, config: Config, memory: Memory) -> Skills:
    return Skills(home.root, config, scan=small_scan, secret_in=memory.secret_in, memory=memory)


# What a scan of a hostile skill finds, as an install records it (two files, two kinds).
DANGEROUS_FINDINGS = (
    Finding("caution", "network-fetch", "SKILL.md", 4, "fetches a URL"),
    Finding(
        "dangerous", "pipe-to-shell", "scripts/setup.sh", 2, "a download is piped into a shell"
    ),
)
