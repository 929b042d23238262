"""`budget:`: the spending limits (spec 001 "Budget"), for the install (top level) and
per agent (`agents.NAME.budget`), and their checks.

Limits are US dollars: `daily` and `monthly` over the periods of the config `timezone`,
`per_turn` over one turn's calls; 0 (or left out) is no limit. `unknown_price` says what
a call to a model with no known price does while any limit is set: `allow` lets it
through at $0, `deny` refuses it. Each mistake is a ConfigError naming the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .errors import ConfigError

UnknownPrice = Literal["allow", "deny"]
LIMIT_KINDS = ("daily", "monthly", "per_turn")


@dataclass
class AgentBudgetConfig:
    """`agents.NAME.budget`: the agent's own limits, on top of the install's."""

    daily: float = 0.0
    monthly: float = 0.0
    per_turn: float = 0.0


@dataclass
class BudgetConfig:
    """`budget`: the whole install's limits."""

    daily: float = 0.0
    monthly: float = 0.0
    per_turn: float = 0.0
    unknown_price: UnknownPrice = "allow"


def check_limits(limits: AgentBudgetConfig | BudgetConfig, path: Path, where: str) -> None:
    """Every limit a finite number >= 0 (ConfigError naming the file, line and key)."""
    for kind in LIMIT_KINDS:
        value = getattr(limits, kind)
        if not math.isfinite(value) or value < 0:
            raise ConfigError(
                f"{path}:{line_of(limits, kind)}: {where}.{kind}: must be a dollar amount"
                f" >= 0 (0 is no limit), not {value!r}"
            )
