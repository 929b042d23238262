"""The message the app posts to its screens when the runtime is open.

It lives with the screens (below app.py) so a screen never imports the app module;
bus events arrive as the typed messages of screens/bus_messages.py.
"""

from __future__ import annotations

from textual.message import Message


class RuntimeReady(Message, bubble=False):
    """The runtime is open and its workers run; screens may load their data."""
