"""The `habakkuk` command: the TUI by default, `--serve`, and the subcommands.

Imports stay at the standard library here so `habakkuk --help` is instant; each
command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from habakkuk.engine.exit_codes import EXIT_OK, error_line, exit_code  # stdlib-only module


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser; `chosen` (the command about to run) limits the nested actions declared
    to that command's (None: every command's)."""
    parser = argparse.ArgumentParser(
        prog="habakkuk",
        description="A personal and team AI agent. With no command, opens the terminal app.",
    )
    parser.add_argument("--serve", action="store_true", help="run every worker headless")
    parser.add_argument(
        "--smoke", action="store_true", help="one offline turn through the real queue and stores"
    )
    parser.add_argument("--resume", action="store_true", help="open the session picker first")
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run one turn (or a /command) and print the reply")
    run.add_argument("--agent", help="agent name (default: the first agent)")
    run.add_argument("--session", help="continue this session")
    run.add_argument("--json", action="store_true", help="print one JSON object at the end")
    run.add_argument(
        "--skill", metavar="NAME", help="use this skill: its instructions, then PROMPT if given"
    )
    run.add_argument(
        "prompt",
        nargs="*",
        help="what to ask, or a chat /command (none, or -, reads it from standard input)",
    )

    sub.add_parser("serve", help="run every worker headless (same as --serve)")

    sessions = sub.add_parser("sessions", help="list, search, export and compact sessions")
    sessions_sub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    listing = sessions_sub.add_parser("list", help="recent sessions, newest first")
    listing.add_argument("--agent")
    listing.add_argument("--limit", type=_count, default=50)
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

    init = sub.add_parser("init", help="write a commented starter config (offline demo)")
    init.add_argument("--force", action="store_true", help="replace an existing config")
    sub.add_parser("doctor", help="check config, keys and databases")
    sub.add_parser("setup", help="interactive setup: provider, key, model and workspace")
    usage = sub.add_parser("usage", help="tokens and cost of model calls by model and agent")
    usage.add_argument("--days", type=float, help="only the last N days (default: all)")
    usage.add_argument("--agent", help="only this agent's calls")
    usage.add_argument("--json", action="store_true", help="print JSON")

    sub.add_parser("channels", help="health of the chat channels")
    pair = sub.add_parser("pair", help="let in the chat user who got this pairing code")
    pair.add_argument("code")
    send = sub.add_parser("send", help="queue a message or file to a chat (serve sends it)")
    send.add_argument("--to", required=True, metavar="CHANNEL:CHAT[:THREAD]")
    send.add_argument("--file", metavar="PATH", help="send this file (TEXT is its caption)")
    send.add_argument("text", nargs="*", help="the message")
    checkpoints = sub.add_parser("checkpoints", help="list workspace checkpoints, newest first")
    checkpoints.add_argument("--agent", help="agent name (default: the first agent)")
    checkpoints.add_argument("-n", type=_count, default=20, help="how many (default 20)")
    rollback = sub.add_parser(
        "rollback", help="restore the workspace (or one path) to a checkpoint"
    )
    rollback.add_argument("--agent", help="agent name (default: the first agent)")
    rollback.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    rollback.add_argument("id", help="checkpoint id (a unique prefix is enough)")
    rollback.add_argument("path", nargs="?", help="restore only this path of the workspace")
    for name, (module, about, description) in NESTED_COMMANDS.items():
        command = sub.add_parser(name, help=about, description=description)
        # A command's actions are declared only when it is the one being run (or for a
        # caller that wants the whole tree), so `habakkuk --help` imports none of them.
        if chosen is None or chosen == name:
            importlib.import_module(module).add_actions(command)
    return parser


# Commands whose actions their own module declares (each a standard-library-only module).
NESTED_COMMANDS: dict[str, tuple[str, str, str | None]] = {
    # command: (module, help, description)
    "board": ("habakkuk.cli.board", "cards of work handed to agents: add, list, assign", None),
    "memory": ("habakkuk.cli.memory", "an agent's notes, their history and the index", None),
    "plugins": ("habakkuk.cli.plugins", "install, enable and remove plugins", None),
    "schedules": ("habakkuk.cli.schedules", "prompts and scripts on a timetable", None),
    "skills": ("habakkuk.cli.skills", "skills: list, install from a source, update, approve", None),
    "mcp": (
        "habakkuk.protocols.mcp.cli",
        "MCP servers: status, catalog, add, login, and Habakkuk as an MCP server",
        "With no action: connect to each configured server and list its tools.",
    ),
}


def command_word(argv: Sequence[str]) -> str:
    """The subcommand `argv` runs: its first word that is not an option ("" for none).
    Every top-level option is a flag, so no option takes that word as its value."""
    return next((word for word in argv if not word.startswith("-")), "")


def _count(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _check_modes(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--serve, --smoke and --resume each pick what runs: refuse them together or with a
    command, rather than silently doing one of them."""
    given = [f"--{flag}" for flag in ("serve", "smoke", "resume") if getattr(args, flag)]
    if len(given) > 1:
        parser.error(f"{' and '.join(given)} cannot be used together")
    if (
        given
        and args.command is not None
        and not (given == ["--serve"] and args.command == "serve")
    ):
        parser.error(f"{given[0]} cannot be used with the {args.command} command")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_word(words))
    args = parser.parse_args(words)
    _check_modes(args, parser)
    if args.version:
        from habakkuk import __version__

        print(f"habakkuk {__version__}")
        return EXIT_OK
    handler = _pick(args, parser)
    from habakkuk.engine.errors import HabakkukError

    try:
        return handler(args)
    except HabakkukError as exc:  # a bad config, a name that matches nothing, a refusal
        print(error_line("", exc), file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130


SIMPLE_COMMANDS = (
    "init",
    "doctor",
    "setup",
    "usage",
    "channels",
    "pair",
    "send",
    "checkpoints",
    "rollback",
)


def _pick(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Callable[..., int]:
    from habakkuk.cli import commands

    if args.smoke:
        return commands.smoke
    if args.serve or args.command == "serve":
        return commands.serve
    if args.command == "run":
        return commands.run
    if args.command == "sessions":
        actions = {
            "list": commands.sessions_list,
            "search": commands.sessions_search,
            "export": commands.sessions_export,
            "compact": commands.sessions_compact,
            "archive": commands.sessions_archive,
            "unarchive": commands.sessions_unarchive,
            "archived": commands.sessions_archived,
            "rm": commands.sessions_rm,
        }
        if args.sessions_command not in actions:
            parser.parse_args(["sessions", "--help"])
        return actions[args.sessions_command]
    # Commands whose function in habakkuk.commands has the command's own name.
    if args.command in SIMPLE_COMMANDS:
        return getattr(commands, args.command)  # type: ignore[no-any-return]
    if args.command == "memory":
        from habakkuk.cli import memory as memory_cli

        return memory_cli.main
    if args.command == "plugins":
        from habakkuk.cli import plugins as plugins_cli

        return plugins_cli.main
    if args.command == "skills":
        from habakkuk.cli import skills as skills_cli

        return skills_cli.main
    if args.command == "board":
        from habakkuk.cli import board as board_cli

        return board_cli.main
    if args.command == "schedules":
        from habakkuk.cli import schedules as schedules_cli

        return schedules_cli.main
    if args.command == "mcp":
        if getattr(args, "mcp_command", None) == "serve":
            return commands.mcp_serve
        from habakkuk.protocols.mcp import cli as mcp_cli

        return mcp_cli.main
    return commands.tui
