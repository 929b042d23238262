"""`habakkuk doctor`: the doctor's checks (habakkuk.services.doctor), one line each."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.services.doctor import Check


def add_arguments(command: str, doctor: argparse.ArgumentParser) -> None:
    """`habakkuk doctor` takes no arguments."""


def main(args: argparse.Namespace) -> int:
    """Print every check; exit 1 when one failed, 2 when the config or .env stopped them."""
    from habakkuk.services.doctor import run_checks

    checks = run_async(run_checks(current_home()))
    failed = False
    for check in checks:
        print(verdict_line(check))
        failed = failed or check.status == "FAIL"
    if checks and checks[-1].name in ("config", ".env") and checks[-1].status == "FAIL":
        # A config or .env that stopped the checks (unreadable, not UTF-8, invalid) is
        # a usage error, as in every command.
        return EXIT_USAGE
    return EXIT_FAILED if failed else EXIT_OK


def verdict_line(check: Check) -> str:
    """A check's line with its verdict (ok, WARN, FAIL) in the language in use, padded to
    the longest verdict so the names line up."""
    verdicts = {status: t(f"cli.doctor.{status.lower()}") for status in ("ok", "WARN", "FAIL")}
    width = max(len(word) for word in verdicts.values())
    return f"{verdicts[check.status]:<{width}}  {check.name}: {check.detail}"
