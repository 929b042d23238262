"""The memory service as the runtime builds it: wired to the home's secrets."""

from __future__ import annotations

from habakkuk.engine.config import Config
from habakkuk.engine.home import Environment, Home, read_env_file
from habakkuk.engine.secret_shapes import secret_variables
from habakkuk.knowledge.service import Memory


def build_memory(home: Home, config: Config, env: Environment) -> Memory:
    """A `Memory` whose scanner refuses the value of every secret this home holds.

    The values are looked up at each write (not once), so a key added to .env while
    Habakkuk runs is refused too.
    """
    return Memory(home, config, lambda: secret_variables(config, env, read_env_file(home.env_path)))
