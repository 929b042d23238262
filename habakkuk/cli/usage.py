"""`habakkuk usage`: tokens and cost of model calls by model and agent."""

from __future__ import annotations

import argparse
import json
import sys

from habakkuk.cli.common import open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE


def add_arguments(command: str, usage: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk usage`."""
    usage.add_argument("--days", type=float, help="only the last N days (default: all)")
    usage.add_argument("--agent", help="only this agent's calls")
    usage.add_argument("--json", action="store_true", help="print JSON")


def main(args: argparse.Namespace) -> int:
    """`habakkuk usage`: tokens and dollars by model and agent."""
    if args.days is not None and args.days <= 0:
        print("habakkuk: usage: --days must be more than 0", file=sys.stderr)
        return EXIT_USAGE
    return run_async(_usage(args.days, args.agent, args.json))


async def _usage(days: float | None, agent: str | None, as_json: bool) -> int:
    runtime = await open_runtime()
    try:
        if agent:
            runtime.config.agent(agent)
        totals = await runtime.ledger.usage_totals(days=days, agent=agent)
    finally:
        await runtime.close()
    if as_json:
        print(json.dumps([t.__dict__ for t in totals], ensure_ascii=False))
        return EXIT_OK
    if not totals:
        span = f" in the last {days:g} days" if days is not None else ""
        print(f"no model calls recorded{span}")
        return EXIT_OK
    header = ("MODEL", "AGENT", "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST")
    rows = [
        (
            t.model,
            t.agent or "-",
            str(t.calls),
            f"{t.input_tokens:,}",
            f"{t.output_tokens:,}",
            f"{t.cache_read_tokens:,}",
            f"{t.cache_write_tokens:,}",
            f"${t.cost:,.4f}" + ("*" if t.unpriced_calls else ""),
        )
        for t in totals
    ]
    rows.append(
        (
            "TOTAL",
            "",
            str(sum(t.calls for t in totals)),
            f"{sum(t.input_tokens for t in totals):,}",
            f"{sum(t.output_tokens for t in totals):,}",
            f"{sum(t.cache_read_tokens for t in totals):,}",
            f"{sum(t.cache_write_tokens for t in totals):,}",
            f"${sum(t.cost for t in totals):,.4f}",
        )
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        print("  ".join(cells).rstrip())
    searches = sum(t.web_searches for t in totals)
    fetches = sum(t.web_fetches for t in totals)
    if searches or fetches:
        # The provider's hosted web tools: their searches are priced in COST.
        print(f"hosted web tools: {searches} search(es), {fetches} fetch(es)")
    if any(t.unpriced_calls for t in totals):
        print("* some calls were to models with no known price (add them under pricing: in config)")
    return EXIT_OK
