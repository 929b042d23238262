"""What the Memory screens share about the memory: who their writes are from.

The screens reach the memory through the app's host (`runtime.memory`, typed by the
knowledge layer's `MemoryAccess`, the memory's one Protocol) and never import the
service, so they can be driven by the real service or anything shaped like it.
"""

from __future__ import annotations

from habakkuk.knowledge.memory_types import Provenance

# Every write from the terminal app is the user's own.
USER = Provenance(by="user", tool="tui")
