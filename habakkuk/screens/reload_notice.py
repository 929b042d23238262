"""The terminal's notices of a hot reload of config.yaml (the ConfigReloaded event)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from habakkuk.engine.events import ConfigReloaded
from habakkuk.engine.i18n import t

Severity = Literal["information", "warning", "error"]


def sections_text(sections: list[str] | tuple[str, ...]) -> str:
    """Section names as config.yaml spells them ("providers, mcp_servers")."""
    return ", ".join(sections)


@dataclass
class ReloadNotices:
    """What to tell the person at each reload: what was applied, what needs a restart
    (when that list changed since the last notice), and an invalid file."""

    _restart: list[str] = field(default_factory=list)
    _invalid: str = ""

    def notices(self, event: ConfigReloaded) -> list[tuple[str, Severity]]:
        """The notices `event` calls for, in order (none when nothing new)."""
        shown: list[tuple[str, Severity]] = []
        if event.invalid and event.invalid != self._invalid:
            shown.append((t("reload.invalid", problem=event.invalid), "error"))
        self._invalid = event.invalid
        if event.invalid:
            return shown
        if event.applied:
            shown.append(
                (t("reload.applied", sections=sections_text(event.applied)), "information")
            )
        if event.restart and event.restart != self._restart:
            text = t("reload.restart", sections=sections_text(event.restart))
            shown.append((text, "warning"))
        self._restart = list(event.restart)
        return shown
