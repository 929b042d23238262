"""`habakkuk backup` and `habakkuk restore` from the command line: what goes in an archive
(and what stays out), its mode, the read-back check, and every refusal of restore, each
one stderr line and nothing of the home touched."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import stat
import tarfile
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.home import Home
from habakkuk.services import backup as backup_service
from habakkuk.services.backup import take_backup
from habakkuk.services.backup_archive import BackupError
from habakkuk.services.backup_layout import Options
from tests.conftest import WriteConfig, mock_config


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def _names(archive: Path) -> set[str]:
    with tarfile.open(archive, "r:gz") as tar:
        return set(tar.getnames())


@pytest.fixture
def used_home(home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> Home:
    """A home that ran a turn, with notes, a profile, skills, a persona, a hook, a
    workspace file, a blob, credentials and a memory index."""
    write_config(mock_config("- text: hi"))
    assert main(["run", "hello"]) == EXIT_OK
    root = home.root
    agent = root / "agents" / "main"
    (agent / "memory").mkdir(parents=True, exist_ok=True)
    (agent / "memory" / "tea.md").write_text("# Tea\nThe user likes tea.\n")
    (agent / "USER.md").write_text("Name: Ada\n")
    (agent / "workspace").mkdir(exist_ok=True)
    (agent / "workspace" / "draft.txt").write_text("a draft\n")
    sqlite3.connect(agent / "memory.db").close()
    (root / "skills" / "greet").mkdir(parents=True)
    (root / "skills" / "greet" / "SKILL.md").write_text("---\nname: greet\n---\nSay hi.\n")
    (root / "personalities").mkdir()
    (root / "personalities" / "pirate.md").write_text("Talk like a pirate.\n")
    (root / "hooks").mkdir()
    hook = root / "hooks" / "notify.sh"
    hook.write_text("#!/bin/sh\necho hi\n")
    hook.chmod(0o700)
    (root / "blobs" / ("a" * 64)).write_bytes(b"blob")
    (root / ".env").write_text("OPENAI_API_KEY=sk-test\n")
    (root / "habakkuk.log").write_text("{}\n")
    capsys.readouterr()
    return home


def test_a_backup_holds_the_home_less_indexes_logs_blobs_workspaces_and_secrets(
    used_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "b.tar.gz"

    assert main(["backup", "-o", str(archive)]) == EXIT_OK

    out = capsys.readouterr().out
    assert f"Wrote {archive}" in out and "Verified" in out
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    names = _names(archive)
    assert {
        "config.yaml",
        "control.db",
        "transcripts.db",
        "state.db",
        "usage.db",
        "agents/main/history.db",
        "agents/main/memory/tea.md",
        "agents/main/USER.md",
        "skills/greet/SKILL.md",
        "personalities/pirate.md",
        "hooks/notify.sh",
        "manifest.json",
    } <= names
    left_out = {".env", "habakkuk.log", "agents/main/memory.db", "agents/main/workspace/draft.txt"}
    assert not names & left_out
    assert not any(n.startswith("blobs/") or n.endswith(("-wal", "-shm")) for n in names)
    with tarfile.open(archive, "r:gz") as tar:
        handle = tar.extractfile("manifest.json")
        assert handle is not None
        manifest = json.loads(handle.read())
        transcripts = tar.extractfile("transcripts.db")
        assert transcripts is not None
        digest = hashlib.sha256(transcripts.read()).hexdigest()
    listed = {f["name"]: f for f in manifest["files"]}
    assert set(listed) == names - {"manifest.json"}
    assert listed["transcripts.db"]["sha256"] == digest and listed["transcripts.db"]["database"]
    assert manifest["format"] == "habakkuk-backup" and manifest["options"]["env"] is False


def test_env_workspaces_and_blobs_are_added_when_asked(
    used_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "all.tar.gz"

    assert main(["backup", "-o", str(archive), "--env", "--workspaces", "--blobs"]) == EXIT_OK

    assert "credentials" in capsys.readouterr().out
    names = _names(archive)
    assert {".env", "agents/main/workspace/draft.txt", "blobs/" + "a" * 64} <= names
    assert "agents/main/memory.db" not in names


def test_the_default_name_is_dated_in_the_current_folder(
    used_home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["backup"]) == EXIT_OK

    [written] = list(tmp_path.glob("habakkuk-backup-*.tar.gz"))
    assert len(written.name) == len("habakkuk-backup-20260101-120000.tar.gz")
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_backup_never_overwrites_a_file(
    used_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "b.tar.gz"
    archive.write_text("mine")

    assert main(["backup", "-o", str(archive)]) == EXIT_FAILED

    assert "already exists" in _one_error_line(capsys)
    assert archive.read_text() == "mine"


def test_a_snapshot_that_fails_its_check_leaves_no_archive(
    used_home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = backup_service.snapshot

    def damaged(source: Path, target: Path) -> None:
        real(source, target)
        if source.name == "transcripts.db":
            _damage(target)

    monkeypatch.setattr(backup_service, "snapshot", damaged)
    archive = tmp_path / "b.tar.gz"

    with pytest.raises(BackupError, match=r"transcripts\.db: the database fails its integrity"):
        take_backup(used_home.root, archive, Options())

    assert list(tmp_path.glob("*b.tar.gz*")) == []


def _damage(path: Path) -> None:
    """Overwrite the header of every page but the first: the b-trees no longer hold."""
    data = bytearray(path.read_bytes())
    page = 4096
    for start in range(page, len(data), page):
        data[start : start + 12] = b"\xa5" * 12
    path.write_bytes(bytes(data))


def test_restore_into_a_missing_home_puts_everything_back(
    used_home: Home,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    archive = tmp_path / "b.tar.gz"
    assert main(["backup", "-o", str(archive), "--env"]) == EXIT_OK
    target = tmp_path / "new-home"
    monkeypatch.setenv("HABAKKUK_HOME", str(target))

    assert main(["restore", str(archive)]) == EXIT_OK

    assert f"into {target}" in capsys.readouterr().out
    assert (target / "agents" / "main" / "memory" / "tea.md").read_text().startswith("# Tea")
    assert (target / ".env").read_text() == "OPENAI_API_KEY=sk-test\n"
    assert stat.S_IMODE((target / "hooks" / "notify.sh").stat().st_mode) == 0o700
    assert stat.S_IMODE((target / "config.yaml").stat().st_mode) == 0o600
    for folder in (target, target / "agents", target / "agents" / "main" / "memory"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert not [p for p in target.iterdir() if p.name.startswith(".restore-")]
    assert main(["sessions", "list"]) == EXIT_OK
    assert "hello" in capsys.readouterr().out


def test_restore_refuses_to_replace_a_config_without_force(
    used_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "b.tar.gz"
    assert main(["backup", "-o", str(archive)]) == EXIT_OK
    used_home.config_path.write_text(mock_config("- text: changed"))
    capsys.readouterr()

    assert main(["restore", str(archive)]) == EXIT_FAILED

    line = _one_error_line(capsys)
    assert "config.yaml exists" in line and "--force" in line
    assert "changed" in used_home.config_path.read_text()
    assert main(["restore", "--force", str(archive)]) == EXIT_OK
    assert "changed" not in used_home.config_path.read_text()


def test_restore_replaces_a_database_and_drops_its_stale_wal(
    used_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "b.tar.gz"
    assert main(["backup", "-o", str(archive)]) == EXIT_OK
    wal = used_home.root / "transcripts.db-wal"
    wal.write_bytes(b"stale pages of another database")

    assert main(["restore", "--force", str(archive)]) == EXIT_OK

    assert not wal.exists()
    conn = sqlite3.connect(used_home.root / "transcripts.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    finally:
        conn.close()


# -- hostile archives -------------------------------------------------------------------


def _archive(
    path: Path, members: list[tuple[tarfile.TarInfo, bytes]], *, listed: bool = True
) -> Path:
    """A tar.gz of `members`, with a manifest listing every regular one (`listed`)."""
    files = [
        {
            "name": info.name,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "database": info.name.endswith(".db"),
        }
        for info, data in members
        if info.isreg() and listed
    ]
    manifest = json.dumps({"format": "habakkuk-backup", "version": 1, "files": files}).encode()
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _special(name: str, kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


CONFIG = mock_config().encode()


@pytest.mark.parametrize(
    ("member", "said"),
    [
        (_special("agents/main/USER.md", tarfile.SYMTYPE, "/etc/passwd"), "a link"),
        (_special("agents/main/USER.md", tarfile.LNKTYPE, "config.yaml"), "a link"),
        (_special("agents/main/tty", tarfile.CHRTYPE), "a device"),
        (_special("skills/x", tarfile.FIFOTYPE), "a device or fifo"),
        (_special("skills/dir", tarfile.DIRTYPE), "not a regular file"),
        (_file("../escape.md"), "not a file a backup writes"),
        (_file("agents/../../escape.md"), "not a file a backup writes"),
        (_file("/etc/cron.d/evil"), "not a file a backup writes"),
        (_file("evil.sh"), "not a file a backup writes"),
        (_file("procs/1.json"), "not a file a backup writes"),
        (_file("agents/main/memory.db"), "not a file a backup writes"),
        (_file("control.db-wal"), "not a file a backup writes"),
    ],
    ids=[
        "symlink",
        "hardlink",
        "device",
        "fifo",
        "folder",
        "dotdot",
        "dotdot-inside",
        "absolute",
        "unexpected-name",
        "unexpected-folder",
        "memory-index",
        "wal",
    ],
)
def test_restore_refuses_a_hostile_member_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    member: tarfile.TarInfo,
    said: str,
) -> None:
    archive = _archive(tmp_path / "evil.tar.gz", [(_file("config.yaml"), CONFIG), (member, b"x")])
    target = tmp_path / "home"
    monkeypatch.setenv("HABAKKUK_HOME", str(target))

    assert main(["restore", str(archive)]) == EXIT_FAILED

    line = _one_error_line(capsys)
    assert member.name in line and said in line, line
    assert not (target / "config.yaml").exists()
    assert not (tmp_path / "escape.md").exists()
    assert [p.name for p in target.iterdir()] == []


def test_restore_refuses_a_file_the_manifest_does_not_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = _archive(tmp_path / "a.tar.gz", [(_file("config.yaml"), CONFIG)], listed=False)
    monkeypatch.setenv("HABAKKUK_HOME", str(tmp_path / "home"))

    assert main(["restore", str(archive)]) == EXIT_FAILED

    assert "config.yaml: refused: the manifest does not list it" in _one_error_line(capsys)


def test_restore_refuses_a_file_whose_hash_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = _archive(tmp_path / "a.tar.gz", [(_file("config.yaml"), CONFIG)])
    with tarfile.open(archive, "r:gz") as tar:
        manifest = tar.extractfile("manifest.json")
        assert manifest is not None
        listed = json.loads(manifest.read())
    listed["files"][0]["sha256"] = "0" * 64
    forged = json.dumps(listed).encode()
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("config.yaml", CONFIG), ("manifest.json", forged)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    monkeypatch.setenv("HABAKKUK_HOME", str(tmp_path / "home"))

    assert main(["restore", str(archive)]) == EXIT_FAILED

    assert "SHA-256 differs" in _one_error_line(capsys)


def test_restore_refuses_a_corrupted_database(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = sqlite3.connect(tmp_path / "good.db")
    good.execute("CREATE TABLE t (x TEXT)")
    good.executemany("INSERT INTO t VALUES (?)", [("row" * 50,)] * 2000)
    good.execute("CREATE INDEX tx ON t (x)")
    good.commit()
    good.close()
    _damage(tmp_path / "good.db")
    archive = _archive(
        tmp_path / "a.tar.gz",
        [
            (_file("config.yaml"), CONFIG),
            (_file("control.db"), (tmp_path / "good.db").read_bytes()),
        ],
    )
    monkeypatch.setenv("HABAKKUK_HOME", str(tmp_path / "home"))

    assert main(["restore", str(archive)]) == EXIT_FAILED

    assert "control.db: the database fails its integrity check" in _one_error_line(capsys)
    assert not (tmp_path / "home" / "control.db").exists()


@pytest.mark.parametrize("content", [b"not an archive at all", b""], ids=["garbage", "empty"])
def test_restore_refuses_what_is_not_an_archive(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
) -> None:
    archive = tmp_path / "x.tar.gz"
    archive.write_bytes(content)
    monkeypatch.setenv("HABAKKUK_HOME", str(tmp_path / "home"))

    assert main(["restore", str(archive)]) == EXIT_FAILED

    assert "not a readable tar.gz backup" in _one_error_line(capsys)


def test_restore_refuses_an_archive_without_a_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "x.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("config.yaml")
        info.size = len(CONFIG)
        tar.addfile(info, io.BytesIO(CONFIG))
    monkeypatch.setenv("HABAKKUK_HOME", str(tmp_path / "home"))

    assert main(["restore", str(archive)]) == EXIT_FAILED

    assert "no manifest.json" in _one_error_line(capsys)


def test_a_key_left_in_config_yaml_is_pointed_out(
    home: Home, write_config: WriteConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-proj-" + "Zq4vR8tLw2Xn9Kp3Hs7Jd1Fb6Gm5Ty0Ue" * 2
    write_config(mock_config() + f"# the old key: {key}\n")

    assert main(["backup", "-o", str(tmp_path / "b.tar.gz")]) == EXIT_OK

    err = capsys.readouterr().err
    assert "config.yaml holds an OpenAI" in err and "move it to .env" in err
    assert key not in err


def test_backup_into_a_missing_folder_is_one_line(
    used_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["backup", "-o", str(tmp_path / "nowhere" / "b.tar.gz")]) == EXIT_FAILED

    assert "nowhere/b.tar.gz: cannot write" in _one_error_line(capsys)
