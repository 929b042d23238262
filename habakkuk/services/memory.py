"""The memory service as the runtime builds it: wired to the home's secrets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from habakkuk.engine.config import Config
from habakkuk.engine.home import Environment, Home, read_env_file
from habakkuk.knowledge.service import Memory

if TYPE_CHECKING:
    from habakkuk.knowledge.embeddings import Embedder


def build_memory(home: Home, config: Config, env: Environment) -> Memory:
    """A `Memory` whose scanner refuses the value of every secret this home holds, and
    that embeds notes when `memory.embeddings` is configured.

    The values are looked up at each write (not once), so a key added to .env while
    Habakkuk runs is refused too.
    """
    embedder: Callable[[], Embedder] | None = None
    wanted = config.memory.embeddings
    if wanted is not None:
        from habakkuk.knowledge.embeddings import build_embedder

        def embedder() -> Embedder:
            return build_embedder(config, wanted.provider, wanted.model, env, home.root)

    def secret_values() -> dict[str, str]:
        # Imported at the first write: its patterns compile as it loads.
        from habakkuk.engine.secret_shapes import secret_variables

        return secret_variables(config, env, read_env_file(home.env_path))

    return Memory(home, config, secret_values, embedder=embedder)
