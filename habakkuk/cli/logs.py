"""`habakkuk logs [-f] [--level warn] [--since 1h] [--grep X] [-n 100]`: habakkuk.log, readably.

Reads the home's habakkuk.log and its rotated copies in order (engine/logread.py) and
prints a line per record: local time, level, logger, message, and a traceback indented
under it. `-f` keeps printing what is appended, across rotations, until Ctrl-C. A line
of the file that is not a record is skipped and counted on stderr, never a traceback.
No runtime is opened: the file is read as it is, even while another process writes it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home
from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE, error_line

if TYPE_CHECKING:
    from habakkuk.engine.logread import LogFilter, LogRecord

FOLLOW_POLL_SECONDS = 0.25


def add_arguments(command: str, logs: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk logs`."""
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
    logs.add_argument(
        "--level", metavar="LEVEL", help="at this level or above: debug, info, warn, error"
    )
    logs.add_argument("--since", metavar="AGE", help="only records newer than this: 30m, 8h, 2d")
    logs.add_argument("--grep", metavar="TEXT", help="only records holding TEXT (any case)")
    logs.add_argument(
        "-n", dest="lines", type=int, default=100, metavar="N", help="the last N records (100)"
    )


def main(args: argparse.Namespace) -> int:
    """`habakkuk logs`: print the records that pass the filters; follow with -f."""
    from habakkuk.engine.i18n import t
    from habakkuk.engine.logread import LogFollower, read_log

    wanted = _filter(args)
    if wanted is None:
        return EXIT_USAGE
    if args.lines < 0:
        print(error_line("logs", t("logs.bad_count", value=args.lines)), file=sys.stderr)
        return EXIT_USAGE
    root = current_home().root
    follower = LogFollower(root, wanted)
    if args.follow:
        follower.start()  # before the read: nothing written in between is missed twice
    read = read_log(root, wanted, args.lines)
    for record in read.records:
        _print(record)
    if read.bad:
        print(t("logs.bad_lines", count=read.bad), file=sys.stderr)
    if not args.follow:
        return EXIT_OK
    try:
        while True:
            for record in follower.poll():
                _print(record)
            sys.stdout.flush()
            time.sleep(FOLLOW_POLL_SECONDS)
    except KeyboardInterrupt:
        pass
    finally:
        follower.close()
        if follower.bad:
            print(t("logs.bad_lines", count=follower.bad), file=sys.stderr)
    return EXIT_OK


def _filter(args: argparse.Namespace) -> LogFilter | None:
    """The filter the options ask for; None (after a one-line error) for a bad one."""
    from habakkuk.engine.i18n import t
    from habakkuk.engine.logread import LogFilter, level_number, parse_age, since_seconds_ago

    level = 0
    if args.level:
        try:
            level = level_number(args.level)
        except ValueError:
            print(error_line("logs", t("logs.bad_level", value=args.level)), file=sys.stderr)
            return None
    since = None
    if args.since:
        try:
            since = since_seconds_ago(parse_age(args.since))
        except ValueError:
            print(error_line("logs", t("logs.bad_since", value=args.since)), file=sys.stderr)
            return None
    return LogFilter(level=level, since=since, grep=args.grep or "")


def format_record(record: LogRecord) -> str:
    """One record as the terminal shows it (a traceback on the lines after)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.time))
    level = "WARN" if record.level == "WARNING" else record.level
    line = f"{stamp} {level:<5} {record.logger}: {record.message}"
    if record.exc:
        line += "\n" + "\n".join("    " + part for part in record.exc.splitlines())
    return line


def _print(record: LogRecord) -> None:
    print(format_record(record))
