"""The `habakkuk` command: the TUI by default, `--serve`, and the subcommands.

Imports stay at the standard library here so `habakkuk --help` is instant. Each command
belongs to one module of this package (its command group), which declares the command's
arguments (`add_arguments(command, parser)`) and runs it (`main(args)`, the exit code),
importing what it needs when it runs; `COMMANDS` names the module and the help line,
so the top-level help lists every command without importing any of those modules. A
new command group is a new module and its lines in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
from collections.abc import Callable, Sequence

from habakkuk.engine.exit_codes import (  # stdlib-only module
    EXIT_OK,
    EXIT_PIPE,
    error_line,
    exit_code,
)

# Every command, in the order `habakkuk --help` lists them:
# command: (its module, the help line, the description of its own --help or None).
COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "chat": (
        "habakkuk.cli.chat",
        "the terminal app (as with no command); --plain: a line-mode chat",
        "On a terminal, the full-screen terminal app, as `habakkuk` alone. With --plain, "
        "or when standard input or output is not a terminal or TERM=dumb, a line-mode chat "
        "for a dumb terminal, a pipe or a screen reader: type a message or a /command; "
        "approvals are asked as y/n prompts; /quit or the end of input ends it.",
    ),
    "tui": ("habakkuk.cli.chat", "the terminal app (as with no command)", None),
    "run": ("habakkuk.cli.run", "run one turn (or a /command) and print the reply", None),
    "talk": (
        "habakkuk.cli.talk",
        "talk with an agent: the microphone in, the reply spoken",
        "A voice loop: each utterance is transcribed (transcription:) and asked in the "
        "session; the reply is printed and spoken (tts:). Settings under talk:.",
    ),
    "serve": ("habakkuk.cli.serve", "run every worker headless (same as --serve)", None),
    "sessions": ("habakkuk.cli.sessions", "list, search, export and compact sessions", None),
    "init": ("habakkuk.cli.setup", "write a commented starter config (offline demo)", None),
    "doctor": ("habakkuk.cli.doctor", "check config, keys and databases", None),
    "status": (
        "habakkuk.cli.status",
        "is the home ready? each store, channel, MCP server and worker pool",
        "Reads GET /readyz of the process serving the home over loopback, else what the "
        "databases say. Exit code 0 ready, 1 not ready, 2 nothing serves the home.",
    ),
    "setup": (
        "habakkuk.cli.setup",
        "interactive setup: provider, key, model, workspace, chat channels",
        None,
    ),
    "usage": ("habakkuk.cli.usage", "tokens and cost of model calls by model and agent", None),
    "channels": ("habakkuk.cli.channels", "health of the chat channels", None),
    "pair": ("habakkuk.cli.channels", "let in the chat user who got this pairing code", None),
    "send": ("habakkuk.cli.channels", "queue a message or file to a chat (serve sends it)", None),
    "whatsapp": ("habakkuk.cli.whatsapp", "link a WhatsApp account by its pairing QR code", None),
    "computer": (
        "habakkuk.cli.computer",
        "an agent's desktop: view it in the terminal or save a screenshot",
        "`habakkuk computer view [AGENT]` draws the agent's Xvfb desktop in the terminal"
        " (--watch redraws it; --save FILE, or a pipe, gets the PNG).",
    ),
    "checkpoints": ("habakkuk.cli.checkpoints", "list workspace checkpoints, newest first", None),
    "rollback": (
        "habakkuk.cli.checkpoints",
        "restore the workspace (or one path) to a checkpoint",
        None,
    ),
    "meetings": ("habakkuk.cli.meetings", "meetings attended as a guest: list, leave ID", None),
    "board": ("habakkuk.cli.board", "cards of work handed to agents: add, list, assign", None),
    "memory": ("habakkuk.cli.memory", "an agent's notes, their history and the index", None),
    "plugins": ("habakkuk.cli.plugins", "install, enable and remove plugins", None),
    "schedules": ("habakkuk.cli.schedules", "prompts and scripts on a timetable", None),
    "skills": ("habakkuk.cli.skills", "skills: list, install from a source, update, approve", None),
    "storage": (
        "habakkuk.cli.storage",
        "where the databases live: status, and migrate to PostgreSQL or back",
        None,
    ),
    "backup": (
        "habakkuk.cli.backup",
        "the home in one verified tar.gz: config, agents, skills, databases",
        "Writes config.yaml, agents/ (notes, USER.md, skills), skills/, personalities/,"
        " plugins/, hooks/ and a consistent snapshot of every database (safe while Habakkuk"
        " runs), then reads the archive back and checks it. Memory indexes, logs and blobs"
        " are left out; credentials only with --env.",
    ),
    "restore": (
        "habakkuk.cli.backup",
        "put a backup back into an empty home (stop habakkuk serve first)",
        None,
    ),
    "auth": (
        "habakkuk.cli.auth",
        "subscription logins: login chatgpt|copilot, status, logout",
        "Sign in with a ChatGPT or GitHub Copilot subscription (a device code), so a "
        "provider with auth: chatgpt or auth: copilot uses it. With no action: status.",
    ),
    "logs": (
        "habakkuk.cli.logs",
        "habakkuk.log, readably: -f follows, --level, --since, --grep, -n",
        None,
    ),
    "security": (
        "habakkuk.cli.security",
        "security audit: modes, exposure, tokens, MCP, skills, backups, disk",
        "`habakkuk security audit` lists what is unsafe, worst first, each with its fix; "
        "--fix applies the permission changes. Exits 1 while a high finding remains.",
    ),
    "expose": (
        "habakkuk.cli.expose",
        "share the HTTP listener with your tailnet: tailscale, status, off",
        "`habakkuk expose tailscale` runs `tailscale serve` (never funnel) in front of the "
        "listener; `status` shows what is shared; `off` stops sharing.",
    ),
    "update": (
        "habakkuk.cli.update",
        "upgrade Habakkuk from its package index with the installer it came with",
        None,
    ),
    "acp": (
        "habakkuk.cli.acp",
        "Habakkuk inside a code editor: the Agent Client Protocol on stdio",
        "Speaks the Agent Client Protocol on standard input and output, for editors that "
        "host agents (Zed, Toad, JetBrains): a session works in the editor's folder and "
        "reads and writes files through the editor. The editor starts it; --agent picks "
        "the agent of new sessions.",
    ),
    "node": (
        "habakkuk.cli.node",
        "device nodes: pair (a one-time code and its QR), run (on the device)",
        "`habakkuk node pair` on the server prints a one-time code, the command to run on "
        "the device and a QR code of the pair page for phones; `habakkuk node run --server "
        "URL --code CODE --name NAME` on the device pairs it and lends the server its "
        "capabilities (notifications, screenshots, clipboard, location; with --allow-run, "
        "--allow-camera and --dir more).",
    ),
    "nodes": ("habakkuk.cli.node", "paired device nodes: list, revoke NAME", None),
    "mcp": (
        "habakkuk.cli.mcp",
        "MCP servers: status, catalog, add, login, and Habakkuk as an MCP server",
        "With no action: connect to each configured server and list its tools.",
    ),
}

# What runs without a command: `--smoke`, `--serve` (the `serve` command's module), and
# with neither, the terminal app.
SMOKE, SERVE, APP = "habakkuk.cli.smoke", "habakkuk.cli.serve", "habakkuk.cli.tui"
# The commands that open the terminal app too (and so take --resume).
APP_COMMANDS = ("chat", "tui")


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser; `chosen` (the command about to run) limits the commands whose arguments
    are declared to that one (None: every command's)."""
    parser = argparse.ArgumentParser(
        prog="habakkuk",
        description="A personal and team AI agent. With no command, opens the terminal app.",
    )
    parser.add_argument("--serve", action="store_true", help="run every worker headless")
    parser.add_argument(
        "--agents",
        metavar="A,B",
        help="with --serve: host only these agents (their turns run here; default: all)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="one offline turn through the real queue and stores"
    )
    parser.add_argument("--resume", action="store_true", help="open the session picker first")
    parser.add_argument("--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # A known command about to run is the only one its words can reach: the others' parsers
    # (argparse looks up its messages' translations for each, 8 ms in all) are left out.
    # Without one (`habakkuk --help`, a mistyped command) every command is listed.
    listed = COMMANDS if chosen not in COMMANDS else {chosen: COMMANDS[chosen]}
    for name, (module, about, description) in listed.items():
        command = sub.add_parser(name, help=about, description=description)
        # A command's arguments are declared only when it is the one being run (or for a
        # caller that wants the whole tree), so `habakkuk --help` imports no command module.
        if chosen is None or chosen == name:
            declare: Callable[[str, argparse.ArgumentParser], None]
            declare = importlib.import_module(module).add_arguments
            declare(name, command)
    return parser


# The top-level options that take a value (the next word, unless given as --opt=value).
VALUED = ("--agents",)


def command_word(argv: Sequence[str]) -> str:
    """The subcommand `argv` runs: its first word that is neither an option nor the value
    of a top-level option that takes one ("" for none)."""
    words = iter(argv)
    for word in words:
        if word in VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


def _check_modes(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--serve, --smoke and --resume each pick what runs: refuse them together or with a
    command, rather than silently doing one of them."""
    given = [f"--{flag}" for flag in ("serve", "smoke", "resume") if getattr(args, flag)]
    from habakkuk.engine.i18n import t

    if len(given) > 1:
        parser.error(t("cli.modes_together", first=given[0], second=given[1]))
    same = (given == ["--serve"] and args.command == "serve") or (
        given == ["--resume"] and args.command in APP_COMMANDS
    )
    if given and args.command is not None and not same:
        parser.error(t("cli.mode_with_command", mode=given[0], command=args.command))
    serving = args.serve or args.command == "serve"
    if getattr(args, "agents", None) is not None and not serving:
        parser.error(t("cli.agents_without_serve"))


def _module(args: argparse.Namespace) -> str:
    """The module that runs what `args` ask for."""
    if args.smoke:
        return SMOKE
    if args.serve:
        return SERVE
    if args.command is None:
        return APP
    return COMMANDS[args.command][0]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code. With no `argv` it is the program (the
    installed `habakkuk`, `python -m habakkuk.cli`): the process ends when it returns."""
    try:
        code = _main(argv)
        if argv is None:
            # Flushed here, inside the try, so a reader that has gone is seen now rather
            # than by the interpreter's own flush at exit (which prints a warning).
            sys.stdout.flush()
        return code
    except BrokenPipeError:
        # `habakkuk status | head`: the reader took what it wanted and closed the pipe.
        # Quiet, as a program killed by SIGPIPE is; what is still buffered goes nowhere.
        if argv is None:
            _drop_stdout()
        return EXIT_PIPE
    finally:
        if argv is None:
            # The interpreter's shutdown walks every object still alive for garbage, a few
            # times over: the modules, classes and functions a command loaded (the model
            # SDK's most of them), 0.16 s of CPU after a one-shot `habakkuk run`. Frozen,
            # they are skipped; the process's ending frees them all the same.
            gc.freeze()


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so the buffered rest of a closed pipe's output
    is discarded at exit instead of raising BrokenPipeError again."""
    import os

    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_word(words))
    args = parser.parse_args(words)  # --help and bad usage end here, before any config read
    from habakkuk.cli.language import cli_language
    from habakkuk.engine.i18n import use_language

    # Chosen once per invocation, for all it runs (asyncio.run copies the context). A
    # block rather than a set: an in-process caller (the tests) gets its language back.
    with use_language(cli_language()):
        _check_modes(args, parser)
        if args.version:
            from habakkuk import __version__

            print(f"habakkuk {__version__}")
            return EXIT_OK
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the command `args` chose; a user-facing error is one stderr line."""
    handler: Callable[[argparse.Namespace], int] = importlib.import_module(_module(args)).main
    from habakkuk.engine.errors import HabakkukError

    try:
        return handler(args)
    except HabakkukError as exc:  # a bad config, a name that matches nothing, a refusal
        print(error_line("", exc), file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130
