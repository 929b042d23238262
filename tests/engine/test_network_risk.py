"""Network risk: MCP servers' tools (risk network) run without asking in workspace mode."""

from __future__ import annotations

import pytest

from habakkuk.engine.toolkit.permissions import Risk, decide


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("read-only", "deny"), ("ask", "ask"), ("workspace", "allow"), ("full", "allow")],
)
def test_network_tools_marked_for_workspace_follow_spec_004(mode: str, expected: str) -> None:
    assert decide(mode, Risk.NETWORK, network_in_workspace=True) == expected


def test_other_network_tools_still_ask_in_workspace_mode() -> None:
    assert decide("workspace", Risk.NETWORK) == "ask"
    assert decide("workspace", Risk.EXEC, network_in_workspace=True) == "ask"
