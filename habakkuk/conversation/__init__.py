"""The chat command layer: every /command declared once (`commands`), the yes/no words
of approval answers (`answers`); used by the terminal app, every channel, the web chat
and `habakkuk run`.

Importing the package registers every command, skill_commands' and delegation_commands'
too (commands.py may not import them: they would import each other)."""

from habakkuk.conversation import budget_commands as _budget_commands  # noqa: F401
from habakkuk.conversation import delegation_commands as _delegation_commands  # noqa: F401
from habakkuk.conversation import goal_commands as _goal_commands  # noqa: F401
from habakkuk.conversation import persona_commands as _persona_commands  # noqa: F401
from habakkuk.conversation import plain as _plain  # noqa: F401
from habakkuk.conversation import skill_commands as _skill_commands  # noqa: F401
from habakkuk.conversation import steer_commands as _steer_commands  # noqa: F401
