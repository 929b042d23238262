"""/budget: spend against the spending limits (spec 001 "Budget"), and the owner's raise.

`/budget` shows today's and this month's spend of the install and of this conversation's
agent against their limits, and what pauses turns now. `/budget raise [daily|monthly]
AMOUNT [AGENT]` raises the current day's (or month's) limit of the install (or of
AGENT) by AMOUNT dollars for this period only (state.db; the config is untouched).

Only the owner raises a limit: the terminal, `habakkuk chat --plain` and `habakkuk run`
run on the owner's machine, under the owner's account. A chat channel has no owner
(allow_from and pairing say who may talk, not who pays), so a chat refuses and says
where it can be done. No tool raises, resets or edits a limit: the model can only ask
the owner to. Registered in `COMMANDS` when the package is imported (see __init__).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from habakkuk.conversation.commands import Conversation, Reply, Surface, command
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.budget_access import BudgetStatus, PeriodKind, PeriodSpend

# The surfaces where whoever types is the owner of the install.
OWNER_SURFACES: frozenset[Surface] = frozenset({"terminal", "plain", "run"})


def _money(amount: float) -> str:
    return f"${amount:,.2f}"


def _period(spend: PeriodSpend, key: str) -> str:
    resets = spend.resets[:16].replace("T", " ")
    if spend.limit <= 0:
        return t(f"budget.show.{key}_unlimited", spent=_money(spend.spent))
    return t(
        f"budget.show.{key}",
        spent=_money(spend.spent),
        limit=_money(spend.limit),
        percent=f"{spend.percent:g}",
        resets=resets,
    )


def budget_lines(status: BudgetStatus) -> list[str]:
    """The spend against the limits, one line per scope (what /budget and `habakkuk
    usage` print)."""
    lines = [t("budget.show.title", timezone=status.timezone, day=status.day)]
    for scope in (status.install, *status.agents):
        who = t("budget.install") if not scope.name else t("budget.agent", agent=scope.name)
        parts = [_period(scope.today, "today"), _period(scope.month, "month")]
        if scope.per_turn > 0:
            parts.append(t("budget.show.per_turn", limit=_money(scope.per_turn)))
        lines.append(f"{who}: " + "; ".join(parts))
    paused = status.install.paused or next((a.paused for a in status.agents if a.paused), "")
    if paused:
        lines.append(paused)
    if not status.limited:
        lines.append(t("budget.show.no_limits"))
    return lines


@command(
    "budget",
    "spend against the spending limits; the owner raises one",
    args="[raise [daily|monthly] AMOUNT [AGENT]]",
)
async def _budget(conv: Conversation, rest: str) -> Reply:
    budget = conv.services.budget
    words = rest.split()
    if not words:
        status = await budget.status(await conv.agent())
        return Reply("\n".join(budget_lines(status)))
    if words[0].lower() != "raise":
        return Reply(t("budget.usage"), error=True)
    if conv.surface not in OWNER_SURFACES:
        return Reply(t("budget.owner_only"), error=True)
    words = words[1:]
    kind: PeriodKind = "daily"
    if words and words[0].lower() in ("daily", "monthly", "today", "month"):
        kind = "monthly" if words.pop(0).lower() in ("monthly", "month") else "daily"
    if not words or len(words) > 2:
        return Reply(t("budget.usage"), error=True)
    try:
        amount = float(words[0].lstrip("$"))
    except ValueError:
        return Reply(t("budget.bad_amount", amount=words[0]), error=True)
    agent = words[1] if len(words) == 2 else ""
    spend = await budget.raise_limit(kind, amount, agent)
    who = t("budget.agent", agent=agent) if agent else t("budget.install")
    return Reply(
        t(
            f"budget.raised_{kind}",
            scope=who,
            amount=_money(amount),
            limit=_money(spend.limit),
            spent=_money(spend.spent),
        )
    )
