"""The pieces of device nodes on their own: the config section, what a device offers,
the shared folder's bounds, node_invoke's refusals, node.json."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.protocols.nodes.capabilities import Capabilities, NodeOptions
from habakkuk.protocols.nodes.client import (
    NodeClientError,
    NodeIdentity,
    read_identity,
    socket_url,
    write_identity,
)
from habakkuk.protocols.nodes.tools import node_tools
from tests.conftest import mock_config
from tests.helpers import tool_context

BASE = mock_config()


def _parse(text: str, home: Home) -> object:
    return parse_config(BASE + text, home.config_path, home)


def test_the_nodes_section_needs_http_and_checks_its_values(home: Home) -> None:
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: nodes: needs the http: section"):
        _parse("nodes: {}\n", home)
    with pytest.raises(ConfigError, match=r"nodes.pair_ttl: 'soon' is not a duration"):
        _parse("http: {}\nnodes: {pair_ttl: soon}\n", home)
    with pytest.raises(ConfigError, match=r"nodes.url: must be a plain http"):
        _parse("http: {}\nnodes: {url: 'ftp://x'}\n", home)
    with pytest.raises(ConfigError, match=r"nodes.allow: laptop: 'rm -rf' is not a command"):
        _parse("http: {}\nnodes: {allow: {laptop: ['rm -rf']}}\n", home)
    with pytest.raises(ConfigError, match=r"nodes.colour: unknown key"):
        _parse("http: {}\nnodes: {colour: red}\n", home)
    config = parse_config(
        BASE + "http: {listen: '0.0.0.0:9000', token_env: T}\n"
        "nodes: {pair_ttl: 2m, allow: {laptop: [system.notify], '*': [location.get]}}\n",
        home.config_path,
        home,
    )
    nodes = config.nodes
    assert nodes is not None
    assert (nodes.url, nodes.pair_ttl_seconds, nodes.heartbeat_seconds) == (
        "http://127.0.0.1:9000",
        120.0,
        20.0,
    )
    assert nodes.allows("laptop", "system.notify") and nodes.allows("phone", "location.get")
    assert not nodes.allows("phone", "system.notify")


def test_a_device_offers_what_its_programs_and_its_user_allow(tmp_path: Path) -> None:
    present = {"notify-send", "grim", "wl-paste", "wl-copy", "ffmpeg"}
    found = Capabilities(
        NodeOptions(allow_run=False, allow_camera=True, folder=tmp_path),
        which=lambda name: f"/usr/bin/{name}" if name in present else None,
        platform="linux",
        environ={"WAYLAND_DISPLAY": "wayland-0"},
    )
    assert found.names == [
        "camera.snap",
        "clipboard.read",
        "clipboard.write",
        "files.get",
        "files.put",
        "screen.snapshot",
        "system.notify",
    ]
    bare = Capabilities(NodeOptions(), which=lambda name: None, platform="linux", environ={})
    assert bare.names == []
    mac = Capabilities(
        NodeOptions(allow_run=True),
        which=lambda name: f"/usr/bin/{name}",
        platform="darwin",
        environ={},
    )
    assert {"system.notify", "screen.snapshot", "clipboard.read", "system.run"} <= set(mac.names)
    assert "camera.snap" not in mac.names  # not asked for


async def test_files_stay_inside_the_shared_folder_links_included(tmp_path: Path) -> None:
    shared, outside = tmp_path / "shared", tmp_path / "secret.txt"
    shared.mkdir()
    outside.write_text("private", encoding="utf-8")
    (shared / "link.txt").symlink_to(outside)
    (shared / "ok.txt").write_text("fine", encoding="utf-8")
    caps = Capabilities(NodeOptions(folder=shared), which=lambda name: None, environ={})
    escaped = await caps.invoke("files.get", {"path": "../secret.txt"})
    assert "outside the shared folder" in escaped.error
    linked = await caps.invoke("files.get", {"path": "link.txt"})
    assert "outside the shared folder" in linked.error
    got = await caps.invoke("files.get", {"path": "ok.txt"})
    assert got.files[0].data == b"fine" and not got.error
    put = await caps.invoke("files.put", {"path": "../evil.txt", "text": "x"})
    assert "outside the shared folder" in put.error and not (tmp_path / "evil.txt").exists()
    unknown = await caps.invoke("system.run", {"command": "id"})
    assert unknown.error == "this node does not offer system.run"


async def test_system_run_is_offered_only_when_allowed_and_reports_the_exit(
    tmp_path: Path,
) -> None:
    caps = Capabilities(NodeOptions(allow_run=True), which=lambda name: None, environ={})
    result = await caps.invoke("system.run", {"command": "echo hi; exit 3"})
    assert result.text == "hi\n\n[exit code 3]"


async def test_node_tools_refuse_read_only_agents_and_a_missing_configuration(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry()
    for tool in node_tools(None, None):
        registry.register(tool)
    allowed = {"nodes_list", "node_invoke"}
    call = ToolUseBlock("t1", "node_invoke", {"node": "laptop", "command": "system.notify"})
    ctx = tool_context(tmp_path, mode="read-only")
    refused = await registry.call(call, ctx, allowed)
    assert refused.is_error and "read-only agents cannot use nodes" in refused.text
    listed = await registry.call(ToolUseBlock("t2", "nodes_list", {}), ctx, allowed)
    assert "read-only agents cannot use nodes" in listed.text
    ctx = tool_context(tmp_path, mode="full")
    missing = await registry.call(call, ctx, allowed)
    assert missing.is_error and "device nodes are not configured" in missing.text


def test_node_json_is_private_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "device" / "node.json"
    write_identity(path, NodeIdentity("http://127.0.0.1:1", "laptop", "s3cret"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_identity(path) == NodeIdentity("http://127.0.0.1:1", "laptop", "s3cret")
    assert read_identity(tmp_path / "none.json") is None
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(NodeClientError, match=r"not a node\.json"):
        read_identity(path)
    assert socket_url("https://h.example/") == "wss://h.example/nodes"
    assert socket_url("http://127.0.0.1:8484") == "ws://127.0.0.1:8484/nodes"
    with pytest.raises(NodeClientError):
        socket_url("ftp://h")
