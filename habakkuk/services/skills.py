"""The skills service as the runtime builds it: the scan, the memory's secret check and
its history wired in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from habakkuk.engine.config import Config
from habakkuk.engine.home import Home
from habakkuk.knowledge.skills.service import Skills
from habakkuk.knowledge.skills.types import ScanReport

if TYPE_CHECKING:
    from habakkuk.knowledge.memory_types import MemoryAccess


def _scan(files: Mapping[str, bytes]) -> ScanReport:
    """The scan of skill_save's text, imported on first use: a save is rare, and the
    scanner's parsers stay out of start-up."""
    from habakkuk.knowledge.scan import scan_files

    return scan_files(files)


def build_skills(home: Home, config: Config, memory: MemoryAccess | None = None) -> Skills:
    """A `Skills` for `home`: skill_save scanned by the skill scanner (fail closed: if it
    cannot be imported or raises, the save is refused), secrets refused with the memory's
    check (its home's secret values) and changes recorded in the memory's history."""
    from habakkuk.knowledge.note_store import NoteStore

    def no_known_values(text: str) -> str | None:
        from habakkuk.engine.secret_scan import find_secret  # its patterns: on first use

        return find_secret(text)

    secret_in = memory.secret_in if isinstance(memory, NoteStore) else no_known_values
    return Skills(home.root, config, scan=_scan, secret_in=secret_in, memory=memory)
