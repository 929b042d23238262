"""`habakkuk meetings [list|leave ID]`: the home's meetings, and asking one to leave.

Reads the records under $HABAKKUK_HOME/meetings (tools/meeting/record.py) without opening
a runtime; `leave` writes the leave file the attendance (run by `habakkuk serve`) watches.
"""

from __future__ import annotations

import argparse
import sys

from habakkuk.cli.common import current_home
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, error_line


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk meetings`."""
    parser.add_argument(
        "action",
        nargs="?",
        choices=("list", "leave"),
        default="list",
        help="list (default) or leave",
    )
    parser.add_argument("id", nargs="?", help="the meeting to leave (meeting_status shows ids)")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk meetings` (the exit code)."""
    from habakkuk.engine.i18n import t
    from habakkuk.tools.meeting.desk import MeetingDesk
    from habakkuk.tools.meeting.record import FINAL
    from habakkuk.tools.meeting.tools import describe

    desk = MeetingDesk(current_home().root, None)
    if args.action == "list":
        found = desk.list()
        for meeting in found:
            print(f"{describe(meeting)}; agent: {meeting.agent}")
        if not found:
            print(t("cli.meetings.none"), file=sys.stderr)
        return EXIT_OK
    if not args.id:
        print(error_line("meetings", t("cli.meetings.leave_needs_id")), file=sys.stderr)
        return EXIT_FAILED
    asked = desk.leave(args.id)
    if asked is None:
        print(error_line("meetings", t("cli.meetings.unknown", id=args.id)), file=sys.stderr)
        return EXIT_FAILED
    if asked.state in FINAL:
        print(t("cli.meetings.over", id=asked.id, state=asked.state))
    else:
        print(t("cli.meetings.leaving", id=asked.id))
    return EXIT_OK
