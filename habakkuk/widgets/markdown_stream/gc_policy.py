"""Full garbage collections kept short while replies stream (a process-wide `gc.freeze`).

A full collection walks every object in the process; with the widgets of a long reply
that takes 100 ms or more, which a key press would wait for. While a reply streams,
what survived the last full collection is frozen (`gc.freeze`), so the next one walks
only what is newer.

Measured (tui_bench part 2, a 20,000-token reply at 200 tokens/s, both runs side by
side on one loaded 2-core machine): without the freeze the full collections during
the stream took 404 ms each (median), 1.57 s at worst and 16.4 s in all, and the worst
key press waited 1.6 s for the screen; with it, 21 ms, 184 ms and 1.4 s, worst key 0.47 s.

Confined and reversible: only a streaming reply holds it (`StreamingMarkdown` holds it
from its first fragment and releases it when the reply finishes or the widget is
unmounted, so also when the app closes mid-stream). When the last holder lets go
everything is unfrozen and collected as usual: nothing frozen is leaked, and nothing
outside a stream runs with the freeze.
"""

from __future__ import annotations

import gc


class FullCollections:
    """Counts the streams that want short full collections; freezes while there are any."""

    def __init__(self) -> None:
        self.holders = 0

    def hold(self) -> None:
        """A stream starts: freeze what exists now, and again after each full collection."""
        self.holders += 1
        if self.holders == 1:
            gc.freeze()
            gc.callbacks.append(self._collected)

    def release(self) -> None:
        """A stream ends: the last one unfreezes everything."""
        if self.holders == 0:
            return
        self.holders -= 1
        if self.holders == 0:
            gc.callbacks.remove(self._collected)
            gc.unfreeze()

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            gc.freeze()


FULL_COLLECTIONS = FullCollections()
