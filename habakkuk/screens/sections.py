"""The terminal app's sections, one key each: the app's bindings, the palette's "Go:"
entries and the keys /help lists are all made from this one table.

Kept free of Textual imports: /help's text is built from it in the chat screen, and
the app binds its keys before any screen loads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """One section: its mode (the screen's id), its footer label, what it is for, its key."""

    mode: str
    label: str
    about: str
    key: str  # Textual's name for it: "ctrl+t"

    @property
    def key_name(self) -> str:
        """The key as /help writes it: "Ctrl+T"."""
        return "+".join(
            part.upper() if len(part) == 1 else part.title() for part in self.key.split("+")
        )


SECTIONS = (
    Section("chat", "Chat", "Talk to the agent", "ctrl+t"),
    Section("sessions", "Sessions", "Find, open and resume sessions", "ctrl+s"),
    Section("approvals", "Approvals", "Every waiting approval", "ctrl+r"),
    Section("overview", "Overview", "Queue, running jobs and errors", "ctrl+o"),
    Section("memory", "Memory", "Notes, the user profile, history and proposals", "ctrl+l"),
    Section("skills", "Skills", "Skills: view, approve, remove and restore", "ctrl+f"),
    Section(
        "schedules", "Schedules", "Schedules: add, run now, pause, delete, their slots", "ctrl+b"
    ),
    # ctrl+d: the text fields' second "delete right" key (Delete is the first).
    Section(
        "board", "Board", "Board: cards by status, add, assign, comment, cancel, reopen", "ctrl+d"
    ),
)


def section_keys() -> str:
    """Every section's key for /help: "Ctrl+T chat · Ctrl+S sessions · ..."."""
    return " · ".join(f"{section.key_name} {section.mode}" for section in SECTIONS)
