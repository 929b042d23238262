"""The messages the app posts to its screens: a runtime bus event, and "the runtime is open".

They live with the screens (below app.py) so a screen never imports the app module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from habakkuk.engine.events import Event


class BusEvent(Message, bubble=False):
    """One runtime bus event, delivered to each live screen."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class RuntimeReady(Message, bubble=False):
    """The runtime is open and its workers run; screens may load their data."""
