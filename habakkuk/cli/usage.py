"""`habakkuk usage`: tokens and cost of model calls by model and agent, then the spend
against the spending limits when any is set (conversation/budget_commands.py's lines)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from habakkuk.cli.common import open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE, error_line
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.budget_access import BudgetStatus


def add_arguments(command: str, usage: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk usage`."""
    usage.add_argument("--days", type=float, help="only the last N days (default: all)")
    usage.add_argument("--agent", help="only this agent's calls")
    usage.add_argument("--json", action="store_true", help="print JSON")


def main(args: argparse.Namespace) -> int:
    """`habakkuk usage`: tokens and dollars by model and agent."""
    if args.days is not None and args.days <= 0:
        print(error_line("usage", t("cli.usage.days_positive")), file=sys.stderr)
        return EXIT_USAGE
    return run_async(_usage(args.days, args.agent, args.json))


async def _usage(days: float | None, agent: str | None, as_json: bool) -> int:
    runtime = await open_runtime()
    try:
        if agent:
            runtime.config.agent(agent)
        totals = await runtime.ledger.usage_totals(days=days, agent=agent)
        status = await runtime.budget.status(agent)
    finally:
        await runtime.close()
    if as_json:
        print(json.dumps([u.__dict__ for u in totals], ensure_ascii=False))
        return EXIT_OK
    if status.limited:
        _print_budget(status)
    if not totals:
        if days is None:
            print(t("cli.usage.none"))
        else:
            print(t("cli.usage.none_in_days", days=f"{days:g}"))
        return EXIT_OK
    columns = ("model", "agent", "calls", "input", "output", "cache_read", "cache_write", "cost")
    header = tuple(t(f"cli.usage.column.{name}") for name in columns)
    rows = [
        (
            u.model,
            u.agent or "-",
            str(u.calls),
            f"{u.input_tokens:,}",
            f"{u.output_tokens:,}",
            f"{u.cache_read_tokens:,}",
            f"{u.cache_write_tokens:,}",
            f"${u.cost:,.4f}" + ("*" if u.unpriced_calls else ""),
        )
        for u in totals
    ]
    rows.append(
        (
            t("cli.usage.total"),
            "",
            str(sum(u.calls for u in totals)),
            f"{sum(u.input_tokens for u in totals):,}",
            f"{sum(u.output_tokens for u in totals):,}",
            f"{sum(u.cache_read_tokens for u in totals):,}",
            f"{sum(u.cache_write_tokens for u in totals):,}",
            f"${sum(u.cost for u in totals):,.4f}",
        )
    )
    widths = [max(cell_len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [_pad(cell, widths[i], left=i < 2) for i, cell in enumerate(row)]
        print("  ".join(cells).rstrip())
    searches = sum(u.web_searches for u in totals)
    fetches = sum(u.web_fetches for u in totals)
    if searches or fetches:
        # The provider's hosted web tools: their searches are priced in COST.
        print(t("cli.usage.web_tools", searches=searches, fetches=fetches))
    if any(u.unpriced_calls for u in totals):
        print(t("cli.usage.unpriced"))
    return EXIT_OK


def _print_budget(status: BudgetStatus) -> None:
    """Spend against the limits (before the table, so it is seen first)."""
    from habakkuk.conversation.budget_commands import budget_lines

    for line in budget_lines(status):
        print(line)
    print()


def cell_len(text: str) -> int:
    """Terminal cells `text` takes: a wide (CJK) character two, so translated headers
    still line up."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(cell: str, width: int, *, left: bool) -> str:
    fill = " " * (width - cell_len(cell))
    return cell + fill if left else fill + cell
