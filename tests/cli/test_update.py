"""`habakkuk update [--check]` against a fake package index on 127.0.0.1 and fake
installer executables (pip run as `python -m pip`, pipx, uv) that record their words."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.cli.update import update
from habakkuk.engine.errors import BadInput, HabakkukError
from habakkuk.services.update import (
    Install,
    Installer,
    current_install,
    detect_installer,
    index_url,
    newest_release,
    version_key,
)
from tests.fakes.package_index import FakeIndex, ThreadedIndex

RECORDER = """\
#!{python}
import json, sys
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
print("Successfully installed habakkuk")
sys.exit({code})
"""


@pytest.fixture
def index() -> Iterator[FakeIndex]:
    fake = FakeIndex()
    for version in ("0.1.0", "0.2.0", "0.10.0"):
        fake.release(version)
    fake.release("0.11.0rc1")  # a pre-release is never offered
    fake.release("0.12.0", yanked=True)  # nor a yanked one
    with ThreadedIndex(fake) as running:
        yield running


class Programs:
    """Fake executables in a folder first on PATH; each records its arguments."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log = folder / "calls.jsonl"

    def add(self, name: str, code: int = 0) -> str:
        path = self.folder / name
        path.write_text(
            RECORDER.format(python=sys.executable, log=str(self.log), code=code), encoding="utf-8"
        )
        path.chmod(0o755)
        return str(path)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Programs:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return Programs(folder)


def install(kind: Installer, python: str = "/nowhere/python", version: str = "0.2.0") -> Install:
    return Install(version, kind, "", python, Path("/nowhere"))


def test_release_versions_order_as_numbers() -> None:
    assert version_key("0.10.0") > version_key("0.9.1") > version_key("0.9")
    assert version_key("1.0") == version_key("1.0.0")
    assert version_key("1.0.post1") > version_key("1.0")


@pytest.mark.parametrize(
    ("json_api", "pep691"),
    [(True, True), (False, True), (False, False)],
    ids=["json", "pep691", "html"],
)
async def test_the_newest_final_release_from_each_kind_of_index(
    json_api: bool, pep691: bool
) -> None:
    fake = FakeIndex(json_api=json_api, pep691=pep691)
    for version in ("0.9.0", "0.10.0", "0.11.0rc1"):
        fake.release(version)
    fake.release("0.12.0", yanked=True)
    await fake.start()
    try:
        assert await newest_release(fake.simple) == "0.10.0"
        assert await newest_release(fake.simple + "/") == "0.10.0"
    finally:
        await fake.close()
    expected = (
        ["/pypi/habakkuk/json"] * 2
        if json_api
        else ["/pypi/habakkuk/json", "/simple/habakkuk/"] * 2
    )
    assert fake.seen == expected


async def test_an_index_without_habakkuk_or_unreachable_is_one_line() -> None:
    fake = FakeIndex()
    await fake.start()
    try:
        with pytest.raises(BadInput, match="has no habakkuk package"):
            await newest_release(fake.simple)
    finally:
        await fake.close()
    with pytest.raises(HabakkukError, match="cannot reach"):
        await newest_release(fake.simple)  # closed now: nothing listens


def test_the_index_comes_from_the_installer_settings(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple/\n", encoding="utf-8")
    assert index_url("pip", {"PIP_INDEX_URL": "https://a.example/simple/"}) == (
        "https://a.example/simple"
    )
    assert index_url("pip", {"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path)}) == (
        "https://mirror.example/simple"
    )
    uv = {"UV_DEFAULT_INDEX": "https://uv.example/simple", "PIP_INDEX_URL": "https://p.example"}
    assert index_url("uv", uv) == "https://uv.example/simple"
    assert index_url("pip", uv) == "https://p.example"
    assert index_url("pip", {"HOME": str(tmp_path)}).startswith("https://")


def test_the_installer_is_found_from_the_environment(tmp_path: Path) -> None:
    assert detect_installer(tmp_path, "pip\n") == "pip"
    assert detect_installer(tmp_path, "uv\n") == "uv"
    (tmp_path / "uv-receipt.toml").write_text("[tool]\n", encoding="utf-8")
    assert detect_installer(tmp_path, "uv") == "uv-tool"
    (tmp_path / "pipx_metadata.json").write_text("{}", encoding="utf-8")
    assert detect_installer(tmp_path, "pip") == "pipx"


def test_pip_upgrades_from_the_same_index(
    index: FakeIndex, programs: Programs, capsys: pytest.CaptureFixture[str]
) -> None:
    python = programs.add("python")
    environ = {"PIP_INDEX_URL": index.simple}
    assert update(install("pip", python), check=False, environ=environ) == 0
    assert programs.calls() == [
        ["-m", "pip", "install", "--index-url", index.simple, "habakkuk==0.10.0"]
    ]
    out = capsys.readouterr().out
    assert f"habakkuk 0.2.0 -> 0.10.0 (from {index.simple}, with pip)" in out
    assert "Updated to habakkuk 0.10.0" in out


def test_check_only_says_what_would_change(
    index: FakeIndex, programs: Programs, capsys: pytest.CaptureFixture[str]
) -> None:
    python = programs.add("python")
    assert update(install("pip", python), check=True, environ={"PIP_INDEX_URL": index.simple}) == 0
    assert programs.calls() == []
    out = capsys.readouterr().out
    assert "0.2.0 -> 0.10.0" in out and "Not installed (--check)" in out


def test_the_newest_release_is_left_alone(
    index: FakeIndex, programs: Programs, capsys: pytest.CaptureFixture[str]
) -> None:
    python = programs.add("python")
    environ = {"PIP_INDEX_URL": index.simple}
    assert update(install("pip", python, "0.10.0"), check=False, environ=environ) == 0
    assert programs.calls() == []
    assert "habakkuk 0.10.0 is the newest release" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kind", "program", "words"),
    [
        ("pipx", "pipx", ["upgrade", "--pip-args=--index-url={index}", "habakkuk"]),
        ("uv-tool", "uv", ["tool", "upgrade", "--index-url", "{index}", "habakkuk"]),
        (
            "uv",
            "uv",
            [
                "pip",
                "install",
                "--python",
                "/nowhere/python",
                "--index-url",
                "{index}",
                "habakkuk==0.10.0",
            ],
        ),
    ],
)
def test_pipx_and_uv_upgrade_with_their_own_commands(
    index: FakeIndex, programs: Programs, kind: Installer, program: str, words: list[str]
) -> None:
    programs.add(program)
    environ = {"PIP_INDEX_URL": index.simple}
    assert update(install(kind), check=False, environ=environ) == 0
    assert programs.calls() == [[word.format(index=index.simple) for word in words]]


def test_a_failing_or_missing_installer(
    index: FakeIndex, programs: Programs, capsys: pytest.CaptureFixture[str]
) -> None:
    environ = {"PIP_INDEX_URL": index.simple}
    with pytest.raises(BadInput, match="pipx is not on PATH"):
        update(install("pipx"), check=False, environ=environ)
    programs.add("pipx", code=1)
    assert update(install("pipx"), check=False, environ=environ) == 1
    assert "habakkuk is unchanged" in capsys.readouterr().err


def test_an_editable_install_is_refused_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    info = tmp_path / "site" / "habakkuk-0.0.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: habakkuk\nVersion: 0.0.5\n", encoding="utf-8"
    )
    (info / "INSTALLER").write_text("uv\n", encoding="utf-8")
    direct = {"url": "file:///src/habakkuk", "dir_info": {"editable": True}}
    (info / "direct_url.json").write_text(json.dumps(direct), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = current_install(prefix=tmp_path)
    assert (found.version, found.installer, found.editable) == ("0.0.5", "uv", "/src/habakkuk")
    assert main(["update", "--check"]) == 2
    err = capsys.readouterr().err
    assert "editable install from /src/habakkuk" in err and "git pull" in err
    assert err.count("\n") == 1
