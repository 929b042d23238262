"""Which of a turn's toolsets the provider's own tool stands in for (spec 000 "Computer",
Native tool).

When the agent offers the toolset `computer` and every model of the turn's chain has
a native computer tool (llm/computer_use.py, by adapter kind and model name), the
computer_* function tools are dropped and the request declares the native tool
(`ModelRequest.computer`); its calls run through the registry like any other (the same
refusals, approvals and limits). A chain with any other model keeps the function tools,
so a fallback model always reads calls of tools it knows. computer_open (the toolset
`computer-open`) is offered with both, since the native tool cannot start apps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config, ModelRef
from ..llm.computer_use import NAME, chain_has_native
from ..llm.types import NativeComputer
from ..toolkit.registry import Tool, ToolRegistry


@dataclass(frozen=True)
class NativeChoice:
    """The function tools a turn offers, the native tools it also lets run, and what the
    request declares."""

    tools: list[Tool]
    names: frozenset[str] = frozenset()
    computer: NativeComputer | None = None


def chain_kinds(config: Config, chain: list[ModelRef]) -> list[tuple[str, str]]:
    """Each model of `chain` with the adapter kind of its provider ("" when unknown)."""
    kinds = []
    for ref in chain:
        provider = config.providers.get(ref.provider)
        kinds.append((str(provider.type or "") if provider is not None else "", ref.model))
    return kinds


async def native_tools(
    registry: ToolRegistry,
    config: Config,
    chain: list[ModelRef],
    toolsets: list[str],
    tools: list[Tool],
    *,
    home: Path,
    agent: str,
) -> NativeChoice:
    """What a turn of `agent` offers: `tools` (of `toolsets`) as they are, or with the
    computer toolset replaced by the native tool where the whole chain has it."""
    native = registry.native(NAME)
    if native is None or NAME not in toolsets:
        return NativeChoice(tools)
    if not chain_has_native(chain_kinds(config, chain)):
        return NativeChoice(tools)
    computer = await native.declared(home, agent)
    if computer is None:
        return NativeChoice(tools)
    replaced = set(registry.toolset(native.replaces))
    kept = [tool for tool in tools if tool.name not in replaced]
    return NativeChoice(kept, frozenset({native.name}), computer)
