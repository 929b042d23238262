"""The computer toolset: an agent's desktop, mouse and keyboard (spec 000 "Computer").

geometry: the sizes and the mapping of coordinates; safety: what is never typed and what
needs a human; keys: key combinations; backend, x11, wayland, macos: the command-line
drivers; xvfb: an agent's own display; desk: the desktops of a process; tools: the
tools; native: Anthropic's computer tool on the same tools. `register_computer` puts
them in a registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.toolkit.registry import ToolRegistry


def register_computer(registry: ToolRegistry, config: Config) -> None:
    """Register the toolsets `computer` and `computer-open` on one Desktops, which the
    registry stops when it closes."""
    from habakkuk.engine.computer_config import ComputerConfig

    from .desk import Desktops
    from .native import NativeComputerTool
    from .tools import computer_tools, open_tool

    def settings(agent: str) -> ComputerConfig:
        found = config.agents.get(agent)
        return found.computer if found is not None else ComputerConfig()

    def sandbox(agent: str) -> str:
        found = config.agents.get(agent)
        return found.sandbox if found is not None else "none"

    desktops = Desktops(settings)
    for tool in computer_tools(desktops, settings, sandbox):
        registry.register(tool, "computer")
    registry.register(open_tool(desktops, settings, sandbox), "computer-open")
    # Anthropic's own computer tool, offered in place of the toolset where the whole
    # chain has it (engine/agent/native.py); it runs the same tools.
    registry.register_native(NativeComputerTool(desktops, settings, sandbox))
    registry.on_close(desktops.close)


__all__: list[str] = ["register_computer"]
