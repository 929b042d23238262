"""`habakkuk chat` (the bare command's terminal app), `habakkuk tui`, `habakkuk chat --plain`.

`tui` opens the full-screen app as `habakkuk` alone does (`--resume` opens the session
picker first); so does `chat` when standard input and output are a terminal that can show
it. `chat --plain` is the line-mode chat (cli/plain_chat.py) for what the app cannot serve:
a dumb terminal, a pipe, a screen reader; `chat` picks it by itself on a pipe or with
TERM=dumb (the spec: "habakkuk chat when stdin and stdout are a terminal; -plain keeps the
line-based chat"), where the app could only fail or fill the output with escapes.
"""

from __future__ import annotations

import argparse
import os
import sys

from habakkuk.engine.exit_codes import EXIT_USAGE


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk chat` and `habakkuk tui`."""
    # SUPPRESS: an absent --resume leaves the top-level one (`habakkuk --resume chat`) as is.
    parser.add_argument(
        "--resume",
        action="store_true",
        default=argparse.SUPPRESS,
        help="open the session picker first",
    )
    if command != "chat":
        return
    parser.add_argument(
        "--plain",
        action="store_true",
        help="a line-mode chat for a dumb terminal, a pipe or a screen reader "
        "(the reply streamed, approvals as y/n prompts, the chat /commands)",
    )
    parser.add_argument("--agent", help="with --plain: agent name (default: the first agent)")
    parser.add_argument("--session", help="with --plain: continue this session")


def wants_plain(args: argparse.Namespace) -> bool:
    """Whether `args` run the line-mode chat: `chat --plain`, or `chat` where the app
    cannot be shown (standard input or output not a terminal, or TERM=dumb)."""
    if args.command != "chat":
        return False
    if args.plain:
        return True
    on_a_terminal = sys.stdin.isatty() and sys.stdout.isatty()
    return not on_a_terminal or os.environ.get("TERM") == "dumb"


def main(args: argparse.Namespace) -> int:
    """The terminal app, or the line-mode chat (wants_plain)."""
    from habakkuk.engine.i18n import t

    if wants_plain(args):
        if getattr(args, "resume", False):
            print(t("plain.resume_not_plain"), file=sys.stderr)
            return EXIT_USAGE
        from habakkuk.cli.plain_chat import main as plain_chat

        return plain_chat(args)
    if getattr(args, "agent", None) or getattr(args, "session", None):
        print(t("plain.needs_plain"), file=sys.stderr)
        return EXIT_USAGE
    from habakkuk.cli.tui import main as app

    return app(args)
