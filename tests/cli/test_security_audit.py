"""`habakkuk security audit [--fix]` on homes built to fail each check (spec 000
"Operations", Security audit)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.audit_findings import Finding
from habakkuk.engine.config import load_config
from habakkuk.engine.home import Home
from habakkuk.services.audit import DiskUsage, apply_fixes, audit
from tests.conftest import WriteConfig

GB = 1024**3
PLENTY = DiskUsage(100 * GB, 10 * GB, 90 * GB)
SAFE = """\
providers:
  mock: {type: mock}
agents:
  main: {model: mock/scripted, mode: workspace}
"""


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def findings_of(home: Home, cwd: Path, disk: DiskUsage = PLENTY) -> list[Finding]:
    config = load_config(home) if home.config_path.exists() else None
    return audit(home, config, cwd=cwd, env=os.environ.get, disk=lambda _: disk)


def about(findings: list[Finding], check: str) -> list[tuple[str, str]]:
    return [(f.severity, f.subject) for f in findings if f.check == check]


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current folder (backup archives are looked for there too)."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def safe(home: Home, write_config: WriteConfig, cwd: Path) -> Home:
    """A home with nothing unsafe: a fresh backup archive of mode 0600 beside it."""
    write_config(SAFE)
    archive = home.root / "habakkuk-backup-20260101.tar.gz"
    archive.write_bytes(b"archive")
    archive.chmod(0o600)
    return home


def test_a_safe_home_has_no_finding_and_exits_zero(
    safe: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["security", "audit"]) == 0
    out = capsys.readouterr().out
    assert "Nothing unsafe found." in out
    assert [f.severity for f in findings_of(safe, Path.cwd())] == ["info"]  # the free disk


def test_open_modes_are_found_and_fix_changes_only_permissions(
    safe: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    root = safe.root
    root.chmod(0o755)
    env = safe.env_path
    env.write_text("KEY=secret\n", encoding="utf-8")
    env.chmod(0o644)
    database = safe.db_path("control")
    database.write_bytes(b"db")
    database.chmod(0o640)
    device = safe.channels_dir / "wa" / "device.db"
    device.parent.mkdir(parents=True)
    device.write_bytes(b"keys")
    device.chmod(0o604)
    (safe.channels_dir).chmod(0o750)
    auth = root / "auth.json"
    auth.write_text("{}", encoding="utf-8")
    auth.chmod(0o666)
    # an agent's workspace is its own business: never audited
    workspace = safe.default_workspace("main")
    workspace.mkdir(parents=True)
    workspace.chmod(0o777)
    (workspace / "notes.db").write_bytes(b"")
    (workspace / "notes.db").chmod(0o666)

    found = about(findings_of(safe, Path.cwd()), "modes")
    assert ("high", str(root)) in found
    assert ("high", ".env") in found and ("high", "auth.json") in found
    assert ("high", "channels/wa/device.db") in found
    assert ("medium", "control.db") in found and ("medium", "channels") in found
    assert not [subject for _, subject in found if "workspace" in subject]

    assert main(["security", "audit"]) == 1
    out = capsys.readouterr().out
    assert f"fix: chmod 600 {env}" in out and f"fix: chmod 700 {root}" in out

    assert main(["security", "audit", "--fix"]) == 0
    out = capsys.readouterr().out
    assert f"fixed: chmod 600 {auth}" in out
    assert mode_of(root) == 0o700 and mode_of(safe.channels_dir) == 0o700
    assert [mode_of(p) for p in (env, database, device, auth)] == [0o600] * 4
    assert env.read_text(encoding="utf-8") == "KEY=secret\n"  # contents untouched
    assert mode_of(workspace) == 0o777 and mode_of(workspace / "notes.db") == 0o666
    assert about(findings_of(safe, Path.cwd()), "modes") == []


def test_full_mode_agent_reached_through_an_open_channel_is_critical(
    safe: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        SAFE.replace("mode: workspace", "mode: full")
        + "channels:\n  tg: {type: telegram, token_env: TG_TOKEN, allow_from: '*'}\n"
    )
    found = findings_of(safe, Path.cwd())
    assert found[0].severity == "critical" and found[0].subject == "agents.main"
    assert "channel tg" in found[0].problem
    assert ("medium", "channels.tg") in about(found, "channels")
    assert main(["security", "audit", "--fix"]) == 1  # --fix never touches the config
    out = capsys.readouterr().out
    assert "CRITICAL  agents.main" in out and "fix: set agents.main.mode: workspace" in out
    assert "mode: full" in safe.config_path.read_text(encoding="utf-8")


def test_a_full_mode_agent_nobody_outside_reaches_is_medium(
    safe: Home, write_config: WriteConfig
) -> None:
    write_config(SAFE.replace("mode: workspace", "mode: full"))
    assert about(findings_of(safe, Path.cwd()), "reach") == [("medium", "agents.main")]


def test_a_reviewer_judged_agent_behind_a_webhook_is_high(
    safe: Home, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "s" * 40)
    write_config(
        SAFE.replace("mode: workspace", "mode: workspace, approvals: reviewer")
        + "http:\n  hooks:\n    gh: {prompt: 'x', secret_env: HOOK_SECRET}\n"
    )
    found = findings_of(safe, Path.cwd())
    assert about(found, "reach") == [("high", "agents.main")]
    assert "webhook gh" in found[0].problem
    assert about(found, "webhooks") == []


def test_http_off_loopback_with_an_unset_or_short_token_and_public_metrics(
    safe: Home, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(
        SAFE + "http:\n  listen: 0.0.0.0:8484\n  token_env: API_TOKEN\n  metrics: {public: true}\n"
    )
    monkeypatch.delenv("API_TOKEN", raising=False)
    found = findings_of(safe, Path.cwd())
    assert ("high", "http.token_env") in about(found, "http")
    assert ("medium", "http.listen") in about(found, "http")  # plain http, no TLS
    assert about(found, "metrics") == [("medium", "http.metrics.public")]
    monkeypatch.setenv("API_TOKEN", "short")
    found = findings_of(safe, Path.cwd())
    assert ("medium", "http.token_env") in about(found, "http")
    assert "only 5 characters" in next(f.problem for f in found if f.subject == "http.token_env")
    monkeypatch.setenv("API_TOKEN", "t" * 40)
    assert about(findings_of(safe, Path.cwd()), "http") == [("medium", "http.listen")]


def test_public_metrics_on_loopback_are_low(safe: Home, write_config: WriteConfig) -> None:
    write_config(SAFE + "http:\n  metrics: {public: true}\n")
    found = findings_of(safe, Path.cwd())
    assert about(found, "metrics") == [("low", "http.metrics.public")]
    assert about(found, "http") == []


def test_webhooks_without_a_secret_or_with_a_short_one(
    safe: Home, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHORT_SECRET", "abc")
    write_config(
        SAFE + "http:\n  hooks:\n    bare: {prompt: 'x'}\n"
        "    weak: {prompt: 'x', secret_env: SHORT_SECRET}\n"
        "    unset: {prompt: 'x', secret_env: NO_SUCH_SECRET}\n"
    )
    found = about(findings_of(safe, Path.cwd()), "webhooks")
    assert found == [
        ("high", "http.hooks.bare"),  # no token either: anyone can post to it
        ("high", "http.hooks.unset"),
        ("medium", "http.hooks.weak"),
    ]


def test_risky_mcp_servers(safe: Home, write_config: WriteConfig) -> None:
    write_config(
        SAFE.replace("mode: workspace", "mode: full") + "mcp_servers:\n"
        "  shell: {command: bash, args: ['-c', 'npx server | tee log'], risk: exec}\n"
        "  remote: {url: 'http://mcp.example.com/mcp', headers: {Authorization: MCP_TOKEN}}\n"
        "  local: {url: 'http://127.0.0.1:9000/mcp'}\n"
        "  tidy: {command: npx, args: [server], risk: read}\n"
    )
    found = findings_of(safe, Path.cwd())
    mcp = sorted(about(found, "mcp"))
    assert mcp == [
        ("high", "mcp_servers.remote"),  # a header over plain http
        ("high", "mcp_servers.shell"),  # exec for a full-mode agent
        ("medium", "mcp_servers.shell"),  # through a shell
    ]


def test_skills_others_can_write_links_out_and_executables(safe: Home, tmp_path: Path) -> None:
    skill = safe.root / "skills" / "deploy"
    skill.mkdir(parents=True)
    text = skill / "SKILL.md"
    text.write_text("---\nname: deploy\n---\n", encoding="utf-8")
    text.chmod(0o666)
    script = skill / "run.sh"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("x", encoding="utf-8")
    (skill / "link.md").symlink_to(outside)
    found = findings_of(safe, Path.cwd())
    skills = about(found, "skills")
    assert ("high", "skills/deploy/SKILL.md") in skills
    assert ("medium", "skills/deploy/link.md") in skills
    assert ("low", "skills/deploy/run.sh") in skills
    failed = apply_fixes(found)
    assert failed == [] and mode_of(text) == 0o644 and mode_of(script) == 0o755
    assert (skill / "link.md").is_symlink()  # a fix is never a deletion


def test_hook_scripts_others_can_write(safe: Home, write_config: WriteConfig) -> None:
    script = safe.root / "hooks" / "guard.sh"
    script.parent.mkdir(mode=0o700)
    script.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    script.chmod(0o777)
    write_config(SAFE + f"hooks:\n  - {{event: tool_before, command: 'sh {script} --strict'}}\n")
    found = findings_of(safe, Path.cwd())
    assert about(found, "hooks") == [("high", "hooks/guard.sh")]
    apply_fixes(found)
    assert mode_of(script) == 0o755


def test_backups_readable_by_others_old_or_missing_and_stale_credentials(
    home: Home, write_config: WriteConfig, cwd: Path
) -> None:
    write_config(SAFE)
    assert about(findings_of(home, cwd), "backups") == [("info", str(home.root))]  # none
    archive = cwd / "habakkuk-backup-20250101.tar.gz"
    archive.write_bytes(b"x")
    archive.chmod(0o644)
    old = 1_000_000_000
    os.utime(archive, (old, old))
    stale = home.root / "backups" / ".env.2025"
    stale.parent.mkdir(mode=0o700)
    stale.write_text("KEY=1\n", encoding="utf-8")
    stale.chmod(0o600)
    found = about(findings_of(home, cwd), "backups")
    assert ("high", str(archive)) in found
    assert ("low", str(home.root)) in found  # the newest archive is years old
    assert ("low", "backups/.env.2025") in found
    assert main(["security", "audit", "--fix"]) == 0
    assert mode_of(archive) == 0o600 and stale.exists()


def test_free_disk_space(safe: Home) -> None:
    def disk(free: int) -> list[tuple[str, str]]:
        return about(findings_of(safe, Path.cwd(), DiskUsage(500 * GB, 0, free)), "disk")

    assert disk(100 * 1024**2) == [("high", str(safe.root))]
    assert disk(800 * 1024**2) == [("medium", str(safe.root))]
    assert disk(20 * GB) == [("medium", str(safe.root))]  # under 5% of the disk
    assert disk(200 * GB) == [("info", str(safe.root))]


def test_findings_are_worst_first(safe: Home, write_config: WriteConfig) -> None:
    write_config(
        SAFE.replace("mode: workspace", "mode: full")
        + "channels:\n  tg: {type: telegram, token_env: TG_TOKEN, allow_from: '*'}\n"
        + "http:\n  metrics: {public: true}\n"
    )
    safe.env_path.write_text("A=1\n", encoding="utf-8")
    safe.env_path.chmod(0o644)
    severities = [f.severity for f in findings_of(safe, Path.cwd())]
    order = ["critical", "high", "medium", "low", "info"]
    assert severities == sorted(severities, key=order.index)
    assert severities[:2] == ["critical", "high"] and severities[-1] == "info"


def test_an_invalid_config_is_one_line_and_a_missing_one_audits_the_files(
    home: Home, cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home.root.chmod(0o711)
    assert main(["security", "audit"]) == 1  # no config: the files are still checked
    assert "the home is open" in capsys.readouterr().out
    home.config_path.write_text("agents: [\n", encoding="utf-8")
    assert main(["security", "audit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("habakkuk:") and "Traceback" not in err


def test_folders_are_checked_two_deep_and_a_checkpoint_repository_is_not_walked(
    safe: Home,
) -> None:
    objects = safe.root / "checkpoints" / "main" / "objects" / "ab"
    objects.mkdir(parents=True, mode=0o755)
    for folder in (objects, objects.parent, objects.parent.parent, objects.parents[2]):
        folder.chmod(0o755)
    (objects / "habakkuk.log").write_text("", encoding="utf-8")  # never looked at
    (objects / "habakkuk.log").chmod(0o644)
    blob = safe.blobs_dir / "aa" / "bb"
    blob.mkdir(parents=True)
    safe.blobs_dir.chmod(0o755)
    found = about(findings_of(safe, Path.cwd()), "modes")
    assert sorted(found) == [("low", "blobs"), ("low", "checkpoints"), ("low", "checkpoints/main")]
