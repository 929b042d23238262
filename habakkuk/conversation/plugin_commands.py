"""Enabled plugins' chat commands in the command layer (spec 000 "Plugins").

`dispatch` (conversation/commands.py) looks up the built-in commands first and falls back
to `config.plugin_commands` here, so a plugin never overrides a built-in: one that tries is
shadowed, listed by `shadowed_commands` (doctor prints it) and left out of /help. A prompt
command queues its prompt, with the user's words appended, as a turn of the conversation;
a script command runs in the plugin's folder (knowledge/plugins/scripts.py) and its output
is the reply, a failure an error reply with stderr's last line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.config import Config, PluginCommand

# Whether a name is a built-in command (commands.find): passed in, so this module and
# commands.py do not import each other.
Builtin = Callable[[str], object]


class _Services(Protocol):
    config: Config


class PluginConversation(Protocol):
    """What a plugin's command uses of the conversation (commands.Conversation is one)."""

    @property
    def surface(self) -> str: ...

    @property
    def services(self) -> _Services: ...

    async def start_turn(self, text: str) -> str | None:
        """Queue `text` as a turn of this conversation (the surface shows its reply)."""
        ...


def plugin_command(config: Config, name: str, builtin: Builtin) -> PluginCommand | None:
    """The enabled plugin's command called `name`, unless a built-in has that name."""
    found = config.plugin_commands.get(name.lower())
    return None if found is None or builtin(found.name) else found


def shadowed_commands(config: Config, builtin: Builtin) -> list[str]:
    """One line per plugin command a built-in command shadows (and that never runs)."""
    return [
        f"plugin {c.plugin}: command /{c.name} is a built-in command; the plugin's is ignored"
        for c in sorted(config.plugin_commands.values(), key=lambda c: c.name)
        if builtin(c.name)
    ]


def help_lines(config: Config, builtin: Builtin) -> list[str]:
    """/help's lines for the plugins' commands, each marked with its plugin."""
    usable = [c for c in config.plugin_commands.values() if not builtin(c.name)]
    return [
        t("plugins.help_line", name=c.name, summary=c.summary, plugin=c.plugin)
        for c in sorted(usable, key=lambda c: c.name)
    ]


def prompt_text(command: PluginCommand, args: str) -> str:
    """The turn a prompt command queues: its prompt, then the user's words."""
    assert command.prompt is not None
    prompt = command.prompt.strip()
    return f"{prompt}\n\n{args}" if args else prompt


async def run(conv: PluginConversation, command: PluginCommand, args: str) -> tuple[str, bool]:
    """Run a plugin's command in `conv`: the reply's text and whether it is an error."""
    from habakkuk.knowledge.plugins.scripts import run_script

    if command.prompt is not None:
        if conv.surface == "run":  # `habakkuk run` has no conversation to queue a turn in
            return t("plugins.prompt_in_run", name=command.name, plugin=command.plugin), True
        await conv.start_turn(prompt_text(command, args))
        return "", False
    config = conv.services.config
    result = await run_script(command, args, config.path.parent)
    if not result.ok:
        return f"/{command.name}: {result.reason}", True
    text = result.output or t("plugins.no_output", name=command.name)
    if result.cut:
        text += "\n" + t("plugins.output_cut")
    return text, False
