"""The providers' native computer tool (spec 000 "Computer", Native tool).

Claude models that were trained on Anthropic's computer tool use it better than our
computer_* function tools. When every model of an agent's chain is such a model on an
`anthropic` provider, the turn drops the toolset `computer` and sets
`ModelRequest.computer` (the display the model is shown); the Anthropic adapter declares
the tool version the model of each request needs and maps its calls onto one stored
shape: a call of the tool `computer` whose input holds the `action` and its parameters
(the same for every version, so a chain may mix them). A chain with any other model
keeps the function tools: the transcript's calls must mean the same to every model that
may read them.

Which model needs which version is `SUPPORT`, one table read newest first: a row names a
family (opus, sonnet, haiku; "" for any) and the first generation it covers. A model the
table does not know (or another provider's) gets none.

* `computer_toolset_20260801` (Claude 5 and later; generally available, no beta header):
  one tools entry with no name; each call is a tool_use named after the member (the
  action) with `toolset_name: computer`, and its result echoes that name.
* `computer_20251124` (beta `computer-use-2025-11-24`: Opus 4.5-4.7, Sonnet 4.6) and
  `computer_20250124` (beta `computer-use-2025-01-24`: the other Claude 4 models and
  Sonnet 3.7): one tool named `computer` with the display's size (and number), whose
  calls carry `action` in their input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .pricing import normalise

NAME = "computer"  # the tool's name in the transcript, and the toolset it replaces
ANTHROPIC = "anthropic"  # the adapter kind that speaks it


@dataclass(frozen=True)
class ComputerVersion:
    """One version of Anthropic's computer tool: its tools-entry type, the beta flag it
    needs ("" for none), whether it is a toolset (calls named after their action) and
    whether the display's size goes with it."""

    type: str
    beta: str = ""
    toolset: bool = False
    zoom: bool = False

    @property
    def sized(self) -> bool:
        """Whether the tools entry carries display_width_px and display_height_px."""
        return not self.toolset


TOOLSET_20260801 = ComputerVersion("computer_toolset_20260801", toolset=True, zoom=True)
COMPUTER_20251124 = ComputerVersion("computer_20251124", "computer-use-2025-11-24", zoom=True)
COMPUTER_20250124 = ComputerVersion("computer_20250124", "computer-use-2025-01-24")

# (family, first generation, version), newest first: the first row a model matches wins.
SUPPORT: tuple[tuple[str, tuple[int, int], ComputerVersion], ...] = (
    ("", (5, 0), TOOLSET_20260801),
    ("opus", (4, 5), COMPUTER_20251124),
    ("sonnet", (4, 6), COMPUTER_20251124),
    ("opus", (4, 0), COMPUTER_20250124),
    ("sonnet", (4, 0), COMPUTER_20250124),
    ("haiku", (4, 5), COMPUTER_20250124),
    ("sonnet", (3, 7), COMPUTER_20250124),
)

# claude-opus-4-5-20251101, claude-sonnet-4-20250514, claude-opus-5 (family first, from 4 on)
_NEW_NAME = re.compile(r"^claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-\d{8}|-latest)?$")
# claude-3-7-sonnet-20250219 (the 3.x models put the family last)
_OLD_NAME = re.compile(r"^claude-(\d+)(?:-(\d{1,2}))?-(opus|sonnet|haiku)(?:-\d{8}|-latest)?$")


def generation(model: str) -> tuple[str, tuple[int, int]] | None:
    """A Claude model's family and generation ("opus", (4, 5)), or None for another."""
    name = normalise(model)
    found = _NEW_NAME.match(name)
    if found is not None:
        return found.group(1), (int(found.group(2)), int(found.group(3) or 0))
    found = _OLD_NAME.match(name)
    if found is not None:
        return found.group(3), (int(found.group(1)), int(found.group(2) or 0))
    return None


@lru_cache(maxsize=1024)  # asked at every request; the table is fixed
def computer_version(kind: str, model: str) -> ComputerVersion | None:
    """The computer tool version a request to `model` through an adapter of `kind`
    declares, or None when it has none."""
    if kind != ANTHROPIC:
        return None
    known = generation(model)
    if known is None:
        return None
    family, number = known
    for row_family, first, version in SUPPORT:
        if row_family in ("", family) and number >= first:
            return version
    return None


def chain_has_native(models: Iterable[tuple[str, str]]) -> bool:
    """Whether every (adapter kind, model) of a chain has a native computer tool (an
    empty chain has not)."""
    listed = list(models)
    return bool(listed) and all(computer_version(kind, model) for kind, model in listed)
