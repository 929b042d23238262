"""The corpus of "Beyond every peer": every malicious skill is dangerous, ordinary ones clean.

tests/skills_corpus/malicious/ holds skills written from the reports issue 15 cites
(OpenClaw's ClawHub "prerequisites" piping base64 into bash, Hermes' importlib string
building, payloads rewritten to pass a regex scan, exfiltration, persistence, password
archives, paste sites, prompt injection) and their combinations; ordinary/ holds everyday
skills (reports, git workflows, PDF and CSV helpers, API clients, deploy docs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.knowledge.scan import scan_folder

CORPUS = Path(__file__).resolve().parents[2] / "skills_corpus"
MALICIOUS = sorted(p for p in (CORPUS / "malicious").iterdir() if p.is_dir())
ORDINARY = sorted(p for p in (CORPUS / "ordinary").iterdir() if p.is_dir())


def test_the_corpus_is_as_large_as_the_issue_asks() -> None:
    assert len(MALICIOUS) >= 40
    assert len(ORDINARY) >= 60
    assert all((p / "SKILL.md").is_file() for p in MALICIOUS + ORDINARY)


@pytest.mark.parametrize("skill", MALICIOUS, ids=lambda p: p.name)
def test_a_malicious_skill_is_dangerous(skill: Path) -> None:
    report = scan_folder(skill)
    assert report.verdict == "dangerous", report.reasons


def test_every_malicious_skill_is_dangerous_and_ordinary_ones_pass() -> None:
    missed = [p.name for p in MALICIOUS if scan_folder(p).verdict != "dangerous"]
    flagged = {p.name: scan_folder(p) for p in ORDINARY}
    failures = {name: r.reasons for name, r in flagged.items() if r.verdict != "clean"}
    rate = 1 - len(failures) / len(ORDINARY)
    print(f"malicious dangerous: {len(MALICIOUS) - len(missed)}/{len(MALICIOUS)}")
    print(f"ordinary clean: {rate:.1%} ({len(ORDINARY) - len(failures)}/{len(ORDINARY)})")
    for name, reasons in failures.items():
        print(f"  not clean: {name}: {reasons}")
    assert not missed
    assert rate >= 0.95, failures


def test_no_corpus_file_is_executable() -> None:
    files = [p for p in CORPUS.rglob("*") if p.is_file() and not p.is_symlink()]
    assert files and not [p for p in files if p.stat().st_mode & 0o111]
