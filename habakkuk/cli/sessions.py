"""`habakkuk sessions list|search|export|compact|archive|unarchive|archived|rm`.

Each action opens the runtime and goes through `runtime.sessions` (and the transcripts'
search); `--json` prints the API's shapes (engine.export.session_json). `habakkuk
sessions` with no action prints this command's help.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from habakkuk.cli.common import ask, count, open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.sessions import Session


def add_arguments(command: str, sessions: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk sessions`."""
    sessions_sub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    listing = sessions_sub.add_parser("list", help="recent sessions, newest first")
    listing.add_argument("--agent")
    listing.add_argument("--limit", type=count, default=50)
    listing.add_argument("--json", action="store_true")
    listing.add_argument(
        "--all", action="store_true", help="also board cards' and sub-agents' sessions"
    )
    search = sessions_sub.add_parser("search", help="full-text search of messages")
    search.add_argument("--agent")
    search.add_argument("query", nargs="+")
    export = sessions_sub.add_parser("export", help="write a transcript as md, json or html")
    export.add_argument("id")
    export.add_argument("--format", choices=["md", "json", "html"], default="md")
    export.add_argument("-o", "--output", help="file to write (default: stdout)")
    compact = sessions_sub.add_parser(
        "compact", help="summarize a session's older messages to shrink its context"
    )
    compact.add_argument("id")
    compact.add_argument("--json", action="store_true")
    for name, about in (
        ("archive", "hide sessions from the recent list"),
        ("unarchive", "bring archived sessions back"),
        ("rm", "delete sessions for good (asks unless -y)"),
    ):
        each = sessions_sub.add_parser(name, help=about)
        each.add_argument("ids", nargs="+", metavar="ID")
        if name == "rm":
            each.add_argument("-y", "--yes", action="store_true", help="do not ask")
    archived = sessions_sub.add_parser("archived", help="archived sessions, newest first")
    archived.add_argument("--json", action="store_true")
    archived.add_argument(
        "--all", action="store_true", help="also board cards' and sub-agents' sessions"
    )


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk sessions ACTION` (the exit code); no action prints the help."""
    actions: dict[str, Callable[[argparse.Namespace], int]] = {
        "list": sessions_list,
        "search": sessions_search,
        "export": sessions_export,
        "compact": sessions_compact,
        "archive": sessions_archive,
        "unarchive": sessions_unarchive,
        "archived": sessions_archived,
        "rm": sessions_rm,
    }
    action = actions.get(args.sessions_command)
    if action is None:
        from habakkuk.cli.entry import build_parser

        build_parser("sessions").parse_args(["sessions", "--help"])  # prints it and exits 0
        raise AssertionError("argparse exits after --help")
    return action(args)


def sessions_list(args: argparse.Namespace) -> int:
    """`habakkuk sessions list [--agent A] [--limit N] [--json] [--all]`: the user's
    sessions, newest first (`--all`: board cards' and sub-agents' too)."""
    return run_async(_sessions_list(args.agent, args.limit, args.json, args.all))


async def _sessions_list(agent: str | None, limit: int, as_json: bool, everything: bool) -> int:
    runtime = await open_runtime()
    try:
        sessions = await runtime.sessions.list_sessions(agent, limit=limit, include_work=everything)
    finally:
        await runtime.close()
    none = t("cli.sessions.none") if everything else t("cli.sessions.none_hint")
    return _print_sessions(sessions, as_json, none)


def sessions_search(args: argparse.Namespace) -> int:
    return run_async(_sessions_search(" ".join(args.query), args.agent))


async def _sessions_search(query: str, agent: str | None) -> int:
    runtime = await open_runtime()
    try:
        if agent:
            runtime.config.agent(agent)
        hits = await runtime.transcripts.search(query, agent=agent)
    finally:
        await runtime.close()
    for hit in hits:
        print(f"{hit.session}  #{hit.seq:<4} {hit.role:<9} {hit.snippet}")
    if not hits:
        if agent:
            print(t("cli.sessions.no_match_agent", agent=agent, query=repr(query)), file=sys.stderr)
        else:
            print(t("cli.sessions.no_match", query=repr(query)), file=sys.stderr)
    return EXIT_OK if hits else EXIT_FAILED


def sessions_export(args: argparse.Namespace) -> int:
    return run_async(_sessions_export(args.id, args.format, args.output))


async def _sessions_export(session_id: str, fmt: str, output: str | None) -> int:
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.engine.export import save_export

    runtime = await open_runtime()
    try:
        text = await runtime.sessions.export_session(session_id, fmt)
    finally:
        await runtime.close()
    if not output:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        where = save_export(runtime.home.root, session_id, fmt, text, output)
    except HabakkukError as exc:  # a bad -o path is the caller's to fix: one line, exit 2
        print(f"habakkuk: sessions export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(t("cli.sessions.wrote", path=where), file=sys.stderr)
    return EXIT_OK


def sessions_compact(args: argparse.Namespace) -> int:
    """`habakkuk sessions compact ID`: run a compaction as a turn of the session."""
    return run_async(_sessions_compact(args.id, args.json))


async def _sessions_compact(session_id: str, as_json: bool) -> int:
    runtime = await open_runtime()
    try:
        await runtime.sessions.session(session_id)
        runtime.start_workers(channels=False)
        job = await runtime.turns.compact_session(session_id)
        outcome = await runtime.turns.wait_turn(job)
        finished = await runtime.queue.get(job)
        result = (finished.result if finished else None) or {}
    finally:
        await runtime.close()
    if as_json:
        body: dict[str, Any] = {
            "session": session_id,
            "job": job,
            "status": "done" if outcome.status == "done" else "failed",
            **{
                k: result[k]
                for k in ("compacted", "tokens_before", "tokens_after", "dropped")
                if k in result
            },
            "reply": outcome.reply,
        }
        if outcome.status != "done":
            body["error"] = outcome.error or outcome.status
        print(json.dumps(body, ensure_ascii=False))
    elif outcome.status == "done":
        print(outcome.reply)
    else:
        print(
            f"habakkuk: compaction {outcome.status}: {outcome.error or ''}".rstrip(": "),
            file=sys.stderr,
        )
    return EXIT_OK if outcome.status == "done" else EXIT_FAILED


def sessions_archive(args: argparse.Namespace) -> int:
    """`habakkuk sessions archive ID...`: hide sessions from the recent list."""
    return run_async(_sessions_each(args.ids, "archive"))


def sessions_unarchive(args: argparse.Namespace) -> int:
    """`habakkuk sessions unarchive ID...`: bring archived sessions back."""
    return run_async(_sessions_each(args.ids, "unarchive"))


def sessions_rm(args: argparse.Namespace) -> int:
    """`habakkuk sessions rm ID... [-y]`: delete sessions for good (asks on a terminal)."""
    if not args.yes:
        if not sys.stdin.isatty():
            print(error_line("sessions rm", t("cli.sessions.rm_not_a_terminal")), file=sys.stderr)
            return EXIT_USAGE
        names = " ".join(args.ids)
        answer = ask(t("cli.sessions.rm_confirm", names=names) + " [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print(t("cli.sessions.rm_nothing"), file=sys.stderr)
            return EXIT_FAILED
    return run_async(_sessions_each(args.ids, "rm"))


async def _sessions_each(ids: list[str], action: str) -> int:
    """Apply archive, unarchive or rm to each id; one line per id that failed (exit 2)."""
    from habakkuk.engine.errors import HabakkukError

    failed = False
    runtime = await open_runtime()
    try:
        for session_id in ids:
            try:
                if action == "rm":
                    await runtime.sessions.delete_session(session_id)
                else:
                    await runtime.sessions.archive_session(session_id, action == "archive")
            except HabakkukError as exc:
                print(error_line(f"sessions {action}", exc), file=sys.stderr)
                failed = True
                continue
            print(t(f"cli.sessions.done_{action}", id=session_id))
    finally:
        await runtime.close()
    return EXIT_USAGE if failed else EXIT_OK


def sessions_archived(args: argparse.Namespace) -> int:
    """`habakkuk sessions archived [--json] [--all]`: the archived sessions, newest first."""
    return run_async(_sessions_archived(args.json, args.all))


async def _sessions_archived(as_json: bool, everything: bool) -> int:
    runtime = await open_runtime()
    try:
        sessions = await runtime.sessions.list_sessions(
            limit=1000, archived=True, include_work=everything
        )
    finally:
        await runtime.close()
    return _print_sessions(sessions, as_json, t("cli.sessions.none_archived"))


def _print_sessions(sessions: list[Session], as_json: bool, none: str) -> int:
    """One line per session (or a JSON array); `none` goes to stderr when there are none."""
    from habakkuk.engine.export import rfc3339, session_json

    if as_json:
        print(json.dumps([session_json(s) for s in sessions], ensure_ascii=False))
        return EXIT_OK
    for s in sessions:
        print(f"{s.id}  {rfc3339(s.updated_at)}  {s.agent:<12}  {s.title}")
    if not sessions:
        print(none, file=sys.stderr)
    return EXIT_OK
