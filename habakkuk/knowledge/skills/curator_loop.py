"""The curator in `habakkuk serve`'s maintenance: at start and every 6 hours, a run when
`skills.curate` says one is due (spec 000 "Skills" -> "Curator").

The pass itself does its file work in a thread (curator.curate); this loop only asks
whether it is due, logs what changed and never lets a failure end the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import ChangeRecorder

from .curator import curate, format_run

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 6 * 3600.0


async def curate_when_due(
    home: Home,
    config: Callable[[], Config],
    memory: ChangeRecorder | None = None,
    *,
    interval: float = INTERVAL_SECONDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Run the curator now and every `interval` seconds when it is due, until cancelled.
    `config` is read at each check, so a reloaded config's `skills.curate` counts."""
    while True:
        current = config()
        if current.skills.curate != "off":
            try:
                run = await curate(home, current, memory=memory)
            except asyncio.CancelledError:
                raise
            except HabakkukError as exc:  # e.g. `skills curate` is running by hand
                log.warning("skills curator: %s", exc)
            except Exception:
                log.exception("skills curator: the pass failed")
            else:
                if run.ran:
                    log.info("skills curator: %s", format_run(run).replace("\n", "; "))
        await sleep(interval)
