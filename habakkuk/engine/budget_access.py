"""The spending limits as the surfaces read them (spec 001 "Budget"), declared once.

`BudgetAccess` is the Protocol of the budget service (habakkuk.services.budget.Budget):
the /budget chat command, `habakkuk usage`, GET /api/budget and the overview name it.
The values it returns are frozen dataclasses; `to_json` gives 001's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

PeriodKind = Literal["daily", "monthly"]


@dataclass(frozen=True)
class PeriodSpend:
    """Dollars spent in one period against its limit (0: none), and when it resets."""

    spent: float
    limit: float
    resets: str  # ISO 8601 with the zone's offset
    raised: float = 0.0  # what the owner's /budget raise added to this period's limit

    @property
    def percent(self) -> float | None:
        """Spent as a percent of the limit (one decimal), None without a limit."""
        return round(self.spent / self.limit * 100, 1) if self.limit > 0 else None

    def to_json(self) -> dict[str, Any]:
        percent = self.percent
        return {
            "spent": round(self.spent, 6),
            "limit": self.limit,
            "percent": int(percent) if percent is not None and percent.is_integer() else percent,
            "resets": self.resets,
        }


@dataclass(frozen=True)
class ScopeSpend:
    """The install's (name "") or one agent's spend today and this month."""

    name: str
    today: PeriodSpend
    month: PeriodSpend
    per_turn: float
    paused: str = ""  # the message turns end with while a limit is used up


@dataclass(frozen=True)
class BudgetStatus:
    """Spend against the limits, for the install and each agent."""

    timezone: str
    day: str
    month: str
    unknown_price: str
    install: ScopeSpend
    agents: tuple[ScopeSpend, ...]

    @property
    def limited(self) -> bool:
        """Some limit is set (the install's or an agent's)."""
        return any(
            s.today.limit > 0 or s.month.limit > 0 or s.per_turn > 0
            for s in (self.install, *self.agents)
        )

    def to_json(self) -> dict[str, Any]:
        """GET /api/budget's body."""
        return {
            "timezone": self.timezone,
            "day": self.day,
            "month": self.month,
            "unknown_price": self.unknown_price,
            "install": {
                "today": self.install.today.to_json(),
                "month": self.install.month.to_json(),
                "per_turn": self.install.per_turn,
            },
            "agents": [
                {
                    "agent": a.name,
                    "today": a.today.to_json(),
                    "month": a.month.to_json(),
                    "per_turn": a.per_turn,
                    "paused": a.paused or None,
                }
                for a in self.agents
            ],
        }


class BudgetAccess(Protocol):
    """What the surfaces use of the budget (habakkuk.services.budget.Budget)."""

    async def status(self, agent: str | None = None) -> BudgetStatus:
        """Spend today and this month against the limits (usage.db read now); `agent`
        keeps that agent only."""
        ...

    async def raise_limit(self, kind: PeriodKind, amount: float, agent: str = "") -> PeriodSpend:
        """Raise the current day's or month's limit of the install (or `agent`) by
        `amount` dollars, for this period only (kept in state.db). HabakkukError when
        that limit is not set or the amount is not a positive number."""
        ...
