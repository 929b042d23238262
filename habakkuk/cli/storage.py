"""`habakkuk storage migrate` and `habakkuk storage status`: where the home's databases
live, and moving them between SQLite files and PostgreSQL.

The work is habakkuk.services.storage_move's; this module parses, shows progress (a bar
on a terminal, one line per table otherwise) and prints the verification. The standard
library only at the top: psycopg is imported by the service when a command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line

if TYPE_CHECKING:
    from habakkuk.services.storage_move import (
        HomeLayout,
        MoveReport,
        Progress,
        StorageStatus,
    )

FILES_NOTE = (
    "not moved (files of the home, not databases): agents' folders (memory notes, skills,"
    " workspace), config.yaml and .env"
)
BAR_WIDTH = 30
EXIT_INTERRUPTED = 130  # as for any command stopped by Ctrl+C (cli/entry.py)


def add_arguments(command: str, storage: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk storage`."""
    actions = storage.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    migrate = actions.add_parser(
        "migrate",
        help="copy the home's SQLite databases into an empty PostgreSQL database"
        " (or, with --to sqlite, back into a new home folder), then verify every table",
    )
    migrate.add_argument(
        "target",
        metavar="URL|PATH",
        help="postgresql://USER:PASSWORD@HOST:PORT/DATABASE, or with --to sqlite a folder",
    )
    migrate.add_argument(
        "--to",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="postgres (default): from this home's SQLite files; sqlite: from its"
        " PostgreSQL database into the folder PATH",
    )
    migrate.add_argument(
        "--from",
        dest="source",
        metavar="URL",
        help="with --to sqlite: the PostgreSQL database (default: the configured storage.url)",
    )
    actions.add_parser(
        "status", help="the backend, its version, each database's schema version and size"
    )


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk storage migrate` or `status` (the exit code)."""
    if args.storage_command == "status":
        return status()
    return migrate(args.target, args.to, args.source)


def _layout() -> HomeLayout:
    from habakkuk.protocols.nodes.store import SCHEMA as NODES
    from habakkuk.server.webstore import SCHEMA as WEB
    from habakkuk.services.storage_move import home_layout

    return home_layout(WEB, NODES)  # nodes.db: the paired device nodes


def migrate(target: str, to: str, source: str | None) -> int:
    """`habakkuk storage migrate`: copy, verify, print the table of checks."""
    from habakkuk.engine.storage import storage_url
    from habakkuk.services.storage_move import move_to_postgres, move_to_sqlite

    where = "storage migrate"
    home = current_home()
    progress = ProgressPrinter(sys.stdout)
    if to == "postgres":
        if not target.startswith(("postgresql://", "postgres://")):
            print(
                error_line(where, f"{target!r} is not a PostgreSQL URL (postgresql://...)"),
                file=sys.stderr,
            )
            return EXIT_USAGE
        print(f"moving the SQLite home in {home.root} to {_redact(target)}")
        moving = move_to_postgres(home.root, target, _layout(), on_progress=progress)
    else:
        if source is None:
            from habakkuk.engine.config import load_config

            source = storage_url(load_config(home))
        if source is None:
            print(
                error_line(
                    where,
                    "this home is on SQLite: name its PostgreSQL database with --from URL"
                    " (or storage.url in config.yaml)",
                ),
                file=sys.stderr,
            )
            return EXIT_USAGE
        if not source.startswith(("postgresql://", "postgres://")):
            print(
                error_line(where, f"{_redact(source)!r} is not a PostgreSQL URL"), file=sys.stderr
            )
            return EXIT_USAGE
        path = Path(target).expanduser()
        print(f"moving the PostgreSQL home at {_redact(source)} to SQLite files in {path}")
        moving = move_to_sqlite(source, path, _layout(), on_progress=progress)
    try:
        report = run_async(moving)
    except KeyboardInterrupt:
        progress.end()
        print(error_line(where, "stopped: run the same command again to resume"), file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        progress.end()
    return _print_report(report, to, target, home.root)


def _redact(url: str) -> str:
    from habakkuk.engine.db_url import redact

    return redact(url)


def _print_report(report: MoveReport, to: str, target: str, home_root: Path) -> int:
    if report.already_done:
        print("this move was done before; verifying it again")
    elif report.resumed:
        print("resumed the move that was stopped")
    header = ("TABLE", "ROWS", "HASH", "")
    rows = [
        (
            check.label,
            str(check.target_rows)
            if check.source_rows == check.target_rows
            else f"{check.source_rows} -> {check.target_rows}",
            check.target_hash[:16],
            "ok" if check.ok else "MISMATCH",
        )
        for check in report.checks
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(
                cell.rjust(widths[i]) if i == 1 else cell.ljust(widths[i])
                for i, cell in enumerate(row)
            ).rstrip()
        )
    total = sum(check.target_rows for check in report.checks)
    print(f"{len(report.checks)} tables, {total} rows")
    print(FILES_NOTE + ("" if report.blobs_shared else ", blobs/"))
    if report.blobs_shared:
        print(
            "blobs/: each file's bytes are a row on PostgreSQL too (every machine sees them)"
            if to == "postgres"
            else "blobs/: written back as files from PostgreSQL's rows"
        )
    if not report.ok:
        bad = [check.label for check in report.checks if not check.ok]
        print(
            error_line("storage migrate", f"verification failed: {', '.join(bad)}"), file=sys.stderr
        )
        return EXIT_FAILED
    if to == "postgres":
        print(
            "verified. To use it, set storage.url in config.yaml"
            f" (or HABAKKUK_DATABASE_URL) to {_redact(target)}"
        )
    else:
        print(
            "verified. To use it, copy config.yaml (less storage.url), .env and agents/"
            + ("" if report.blobs_shared else " and blobs/")
            + f" from {home_root} to {target}, and set HABAKKUK_HOME={target}"
        )
    return EXIT_OK


class ProgressPrinter:
    """A progress bar redrawn in place on a terminal; one line per table otherwise."""

    def __init__(self, out: TextIO):
        self.out = out
        self.tty = out.isatty()
        self._drawn = False

    def __call__(self, progress: Progress) -> None:
        label, done, total = progress.table.label, progress.done, progress.total
        finished = done >= total
        if self.tty:
            filled = BAR_WIDTH if total == 0 else BAR_WIDTH * done // total
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.out.write(f"\r\x1b[2K{label:<32} [{bar}] {done}/{total}")
            self._drawn = True
            if finished:
                self.out.write("\n")
                self._drawn = False
            self.out.flush()
        elif finished:
            rows = "row" if total == 1 else "rows"
            print(f"{label}: {total} {rows} copied", file=self.out, flush=True)

    def end(self) -> None:
        """End a bar left mid-line."""
        if self._drawn:
            self.out.write("\n")
            self._drawn = False


def status() -> int:
    """`habakkuk storage status`: backend, server version, each database's version,
    size and main tables' rows."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.storage import storage_url
    from habakkuk.services.storage_move import postgres_status, sqlite_status

    home = current_home()
    names = _layout().names
    url = storage_url(load_config(home))
    report = sqlite_status(home.root, names) if url is None else postgres_status(url, names)
    _print_status(report)
    return EXIT_OK


def _print_status(report: StorageStatus) -> None:
    engine = "SQLite" if report.backend == "sqlite" else "PostgreSQL"
    print(f"backend: {report.backend} ({report.where})")
    print(f"version: {engine} {report.server_version}")
    for database in report.databases:
        if database.version is None:
            print(f"{database.name}: not created")
            continue
        counts = ", ".join(f"{table} {rows}" for table, rows in database.rows)
        line = f"{database.name}: schema version {database.version}, {_size(database.size_bytes)}"
        print(f"{line}; {counts}" if counts else line)


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
