"""`habakkuk schedules add|list|show|runs|run|pause|resume|rm`.

The parser is declared with the standard library only (habakkuk/cli/entry.py builds it);
running a command opens the runtime and goes through `runtime.schedules`
(SchedulesAccess), the service the tools, the HTTP API and the terminal use. This is the
only way to add a script schedule (`--run CMD`): the owner at the terminal adds it, never
an agent or the API. Times are shown in the config timezone; `--json` prints the HTTP
API's shapes (habakkuk.work.schedule_views). A user error (a `when` not understood, no
such schedule or agent, options that do not go together) is one line on stderr and an
exit code from engine/exit_codes.py, no traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE, error_line
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    import datetime as dt

    from habakkuk.work.schedule_types import Schedule, SchedulesAccess

ACTIONS = ("add", "list", "show", "runs", "run", "pause", "resume", "rm")
ON_OUTPUT = ("deliver", "agent", "silent")
MISSED = ("skip", "once")
_SCRIPT_ONLY = ("on_output", "timeout", "workdir")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 10000, not {value}")
    return value


def add_arguments(command: str, schedules: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk schedules` (entry.py declares the command itself)."""
    actions = schedules.add_subparsers(dest="schedules_command", metavar="ACTION")

    def action(name: str, about: str, *, by_id: bool = True) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=about)
        if by_id:
            parser.add_argument("id", metavar="ID|NAME", help="a schedule id (sch_...) or its name")
        parser.add_argument("--json", action="store_true", help="print the API's JSON")
        return parser

    add = action("add", "add a prompt (--prompt) or a script (--run) schedule", by_id=False)
    add.add_argument("--agent", help="agent name (default: the first agent)")
    add.add_argument(
        "--name", required=True, help="a name for people, unique per agent (the actions take it)"
    )
    add.add_argument(
        "--when",
        required=True,
        metavar="SPEC",
        help="cron (0 8 * * 1-5), @every 2h (or every 2h), @hourly, @daily, @weekly, "
        "@monthly or at YYYY-MM-DD HH:MM, in the config timezone",
    )
    add.add_argument("--prompt", metavar="TEXT", help="what the agent is asked each run")
    add.add_argument("--run", metavar="CMD", help="a command for /bin/sh -c, instead of a prompt")
    add.add_argument(
        "--on-output", choices=ON_OUTPUT, help="a script's output: deliver (default), agent, silent"
    )
    add.add_argument("--timeout", help="a script's time limit (default 2m)")
    add.add_argument("--workdir", metavar="DIR", help="a script's folder (default the workspace)")
    add.add_argument("--deliver", metavar="CHANNEL:CHAT[:THREAD]", help="where results go")
    add.add_argument(
        "--missed", choices=MISSED, default="skip", help="after downtime: skip, or run once"
    )
    listing = action("list", "every schedule, the next to run first", by_id=False)
    listing.add_argument("--agent", help="only this agent's schedules")
    action("show", "one schedule with its next fire times and last output")
    runs = action("runs", "its slots, newest first: ran, skipped and why, delivered or not")
    runs.add_argument("--limit", type=_count, default=50)
    action("run", "queue one extra run now, under its own job id")
    action("pause", "stop running it (its slots are recorded as skipped: paused)")
    action("resume", "run it again from now (missed slots are not replayed)")
    action("rm", "delete it")


def _fail(args: argparse.Namespace, message: str | Exception) -> int:
    print(error_line(f"schedules {args.schedules_command}", message), file=sys.stderr)
    return EXIT_USAGE


def _check_add(args: argparse.Namespace) -> str | None:
    """What is wrong with `add`'s options together (None: nothing)."""
    if args.run is None and args.prompt is None:
        return "give --prompt TEXT or --run CMD"
    if args.run is None:
        given = [f"--{n.replace('_', '-')}" for n in _SCRIPT_ONLY if getattr(args, n) is not None]
        if given:
            return f"{', '.join(given)} only go with --run"
        if not args.prompt.strip():
            return "--prompt is empty"
        return None
    if not args.run.strip():
        return "--run is empty"
    # A script's prompt is what an `agent` on_output runs with the output appended.
    if args.prompt is not None and args.on_output != "agent":
        return "give --prompt or --run, not both (a script takes a prompt with --on-output agent)"
    return None


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk schedules ACTION` (the exit code)."""
    if args.schedules_command not in ACTIONS:
        print("habakkuk: schedules: give an action: " + ", ".join(ACTIONS), file=sys.stderr)
        return EXIT_USAGE
    if args.schedules_command == "add":
        problem = _check_add(args)
        if problem is not None:
            return _fail(args, problem)
    import asyncio  # not at module level: `habakkuk --help` builds this parser

    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    from habakkuk.engine.errors import ConfigError, HabakkukError
    from habakkuk.runtime import Runtime

    runtime = await Runtime.open()
    try:
        zone = runtime.config.timezone
        try:
            if args.schedules_command == "add":
                # None given: "" (the service takes the default agent, as for the API).
                agent = runtime.config.agent(args.agent).name if args.agent else ""
                return await _add(runtime.schedules, agent, args, zone)
            if args.schedules_command == "list":
                only = runtime.config.agent(args.agent).name if args.agent else None
                return await _list(runtime.schedules, only, args, zone)
            return await _act(runtime.schedules, args, zone)
        except ConfigError:
            raise  # entry.main prints it
        except HabakkukError as exc:  # WhenError, NotFound, ScheduleRefused, bad input
            return _fail(args, exc)
    finally:
        await runtime.close()


def _out(data: Any) -> None:
    import json

    print(json.dumps(data, ensure_ascii=False, indent=2))


async def _add(schedules: SchedulesAccess, agent: str, args: argparse.Namespace, zone: str) -> int:
    from habakkuk.engine.durations import parse_duration
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.work.schedule_types import SCRIPT_TIMEOUT, NewSchedule
    from habakkuk.work.schedule_views import fire_times, schedule_json

    timeout = SCRIPT_TIMEOUT
    if args.timeout is not None:
        try:
            timeout = parse_duration(args.timeout)
        except ValueError as exc:
            raise HabakkukError(f"--timeout: {exc}") from None
    deliver_to = args.deliver.strip() if args.deliver else None  # the service checks it
    new = NewSchedule(
        agent=agent,
        name=args.name.strip(),
        when=args.when.strip(),
        prompt=(args.prompt or "").strip(),
        command=args.run.strip() if args.run is not None else None,
        on_output=args.on_output or "deliver",
        deliver_to=deliver_to,
        workdir=args.workdir,
        timeout_seconds=timeout,
        missed=args.missed,
    )
    schedule = await schedules.add(new, by="owner")
    upcoming = schedules.upcoming(schedule)
    if args.json:
        _out(schedule_json(schedule, next_runs=upcoming))
        return EXIT_OK
    print(schedule.id)
    # The reading echoed back, so a `when` understood otherwise than meant shows at once.
    print(f"{schedules.reading(schedule)}, next at {fire_times(upcoming, zone)}")
    return EXIT_OK


def _row(schedule: Schedule, zone: str) -> str:
    from habakkuk.work.schedule_views import local_time, state_word

    return (
        f"{schedule.id:<20} {schedule.agent:<12} {schedule.name[:24]:<24} {schedule.kind:<6} "
        f"{state_word(schedule):<7} {local_time(schedule.next_run, zone):<21} "
        f"{schedule.spec[:24]:<24} {schedule.last_status[:40]}"
    ).rstrip()


async def _list(
    schedules: SchedulesAccess, agent: str | None, args: argparse.Namespace, zone: str
) -> int:
    from habakkuk.work.schedule_views import schedules_json

    found = await schedules.list_schedules(agent)
    if args.json:
        _out(schedules_json(found))
        return EXIT_OK
    if found:
        print(
            f"{'ID':<20} {'AGENT':<12} {'NAME':<24} {'KIND':<6} {'STATE':<7} {'NEXT':<21} "
            f"{'WHEN':<24} LAST"
        )
    for schedule in found:
        print(_row(schedule, zone))
    print(t("cli.schedules.count", count=len(found)), file=sys.stderr)
    return EXIT_OK


def _upcoming(schedules: SchedulesAccess, schedule: Schedule) -> list[dt.datetime]:
    """The next three fire times of an enabled schedule ([] when paused or spent, or
    when its one-off time has passed while it waits for the tick)."""
    return schedules.upcoming(schedule)


def _show(schedules: SchedulesAccess, schedule: Schedule, zone: str) -> None:
    from habakkuk.work.schedule_views import fire_times, local_time, state_word

    print(f"{schedule.id} {schedule.name!r} ({schedule.kind}, agent {schedule.agent})")
    reading = schedules.reading(schedule)
    print(f"when: {schedule.spec} ({reading})  [{state_word(schedule)}, missed: {schedule.missed}]")
    if schedule.enabled and schedule.next_run is not None:
        upcoming = _upcoming(schedules, schedule)
        shown = fire_times(upcoming, zone) if upcoming else local_time(schedule.next_run, zone)
        print(f"next: {shown}")
    if schedule.command is not None:
        print(f"run: {schedule.command}")
        print(f"on output: {schedule.on_output}; timeout {schedule.timeout_seconds:g}s")
        print(f"workdir: {schedule.workdir or '(the workspace)'}")
    if schedule.prompt:
        print(f"prompt: {schedule.prompt}")
    print(f"delivers to: {schedule.deliver_to or schedule.origin or '(the run session)'}")
    print(f"created: {local_time(schedule.created_at, zone)}")
    last = local_time(schedule.last_run, zone)
    print(f"last run: {last} {schedule.last_status}".rstrip())
    if schedule.fail_streak:
        print(f"failures in a row: {schedule.fail_streak}")
    if schedule.last_output:
        print("last output:")
        print(schedule.last_output.rstrip())


async def _act(schedules: SchedulesAccess, args: argparse.Namespace, zone: str) -> int:
    from habakkuk.work.schedule_views import (
        local_time,
        run_now_json,
        runs_json,
        schedule_json,
        slot_outcome,
    )

    action = args.schedules_command
    schedule = await schedules.find(args.id)  # by id, else name; NotFound, or names several
    if action == "show":
        if args.json:
            _out(schedule_json(schedule, next_runs=_upcoming(schedules, schedule)))
        else:
            _show(schedules, schedule, zone)
        return EXIT_OK
    if action == "runs":
        slots = await schedules.runs(schedule.id, limit=args.limit)
        if args.json:
            _out(runs_json(slots))
            return EXIT_OK
        for slot in slots:
            extra = " (extra run)" if slot.extra else ""
            where = f"  session {slot.session}" if slot.session else ""
            print(f"{local_time(slot.slot, zone):<21} {slot_outcome(slot)}{extra}{where}")
        print(f"{len(slots)} slot(s)", file=sys.stderr)
        return EXIT_OK
    if action == "run":
        job = await schedules.run_now(schedule.id)
        if args.json:
            _out(run_now_json(job, schedule))
        else:
            print(job)
        if await schedules.ticker() is None:
            # Queued in control.db, but no process of this home runs schedules right now.
            print(
                f"queued; nothing is serving this home, so it runs when `habakkuk --serve` or "
                f"the terminal app is up (`habakkuk schedules runs {schedule.id}` shows it)",
                file=sys.stderr,
            )
        return EXIT_OK
    if action == "rm":
        await schedules.delete(schedule.id)
        if not args.json:
            print(f"deleted {schedule.id} {schedule.name!r}")
        return EXIT_OK
    changed = await (schedules.pause if action == "pause" else schedules.resume)(schedule.id)
    if args.json:
        _out(schedule_json(changed))
    elif action == "pause":
        print(f"paused {changed.id} {changed.name!r}")
    else:
        print(f"resumed {changed.id} {changed.name!r}; next {local_time(changed.next_run, zone)}")
    return EXIT_OK
