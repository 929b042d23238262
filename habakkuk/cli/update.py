"""`habakkuk update [--check]`: the newest release on the package index Habakkuk came
from, what would change, and the upgrade with the same installer (pip, pipx or uv).
An editable install is refused with one line (update its checkout with git). The
finding and the commands are habakkuk.services.update's."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from habakkuk.cli.common import run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.services.update import Install


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """`habakkuk update [--check]`."""
    parser.add_argument(
        "--check", action="store_true", help="only say what would change; install nothing"
    )


def main(args: argparse.Namespace) -> int:
    """Check the index, then upgrade unless --check (the exit code)."""
    from habakkuk.services.update import current_install

    return update(current_install(), check=args.check)


def update(install: Install, *, check: bool, environ: Mapping[str, str] | None = None) -> int:
    """What `habakkuk update` does for `install` (`environ`: the variables that pick the
    index; default the process's)."""
    from habakkuk.engine.errors import BadInput
    from habakkuk.services.update import UpdatePlan, index_url, newest_release

    if install.editable:
        raise BadInput.said("update.editable", path=install.editable)
    index = index_url(install.installer, dict(environ) if environ is not None else None)
    plan = UpdatePlan(install, index, run_async(newest_release(index)))
    if not plan.newer:
        print(t("update.up_to_date", version=install.version, index=index))
        return EXIT_OK
    print(
        t(
            "update.would_change",
            current=install.version,
            newest=plan.newest,
            index=index,
            installer=install.installer,
        )
    )
    command = plan.command()
    if check:
        print(t("update.check_only", command=shlex.join(command)))
        return EXIT_OK
    print(f"$ {shlex.join(command)}", flush=True)
    try:
        done = subprocess.run(command, check=False)
    except FileNotFoundError:
        raise BadInput.said("update.no_installer", program=command[0]) from None
    if done.returncode != 0:
        line = t("update.failed", program=command[0], code=done.returncode)
        print(f"habakkuk: {line}", file=sys.stderr)
        return EXIT_FAILED
    print(t("update.done", version=plan.newest))
    return EXIT_OK
