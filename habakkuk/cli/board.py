"""`habakkuk board add|list|show|assign|priority|comment|cancel|reopen`.

The parser is declared with the standard library only (habakkuk/cli/entry.py builds it);
running an action opens the runtime and goes through `runtime.board` (BoardAccess), the
service the tools, the HTTP API and the terminal use, as the user (USER), who may change
any card. Every action reads the card back and prints its state now ("card_ab12 is
doing (attempt 1)"); `--json` prints the API's shape (work.board_views.card_json). This
process runs no dispatcher: the board's change touches its wake file, so a running
`habakkuk serve` dispatches at once. A user error is one line on stderr, no traceback:
exit 2 for bad input, a refusal or a card that does not exist (engine/exit_codes.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE, error_line, exit_code
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.work.board_types import BoardAccess, Card

ACTIONS = ("add", "list", "show", "assign", "priority", "comment", "cancel", "reopen")
# Kept here (not imported from board_types) so `habakkuk --help` imports nothing more.
STATUS_WORDS = ("open", "all", "todo", "doing", "blocked", "done", "cancelled")
PRIORITY_RANGE = (-100, 100)


def add_arguments(command: str, board: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk board` (entry.py declares the command itself)."""
    actions = board.add_subparsers(dest="board_command", metavar="ACTION")

    def action(name: str, about: str, *, by_id: bool = True) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=about)
        if by_id:
            parser.add_argument("id", help="a card id (card_...; a unique prefix is enough)")
        parser.add_argument("--json", action="store_true", help="print the API's JSON")
        return parser

    add = action("add", "put a card on the board (prints its id)", by_id=False)
    add.add_argument("title", metavar="TITLE", help="what is to be done, in a line")
    add.add_argument("--to", metavar="AGENT", help="the agent who does it (default: nobody yet)")
    add.add_argument("--priority", metavar="N", help="-100..100, higher first (default 0)")
    add.add_argument("--parent", metavar="ID", help="the card this one is part of")
    add.add_argument(
        "--depends-on", metavar="ID,...", help="cards that must be done first (fixed now)"
    )
    add.add_argument("--deliver", metavar="CHANNEL:CHAT[:THREAD]", help="where the result is sent")
    add.add_argument("--body", metavar="TEXT", help="the details")
    listing = action("list", "the cards, highest priority first", by_id=False)
    listing.add_argument(
        "--status", default="open", metavar="open|all|STATUS", help="which (default: open)"
    )
    listing.add_argument("--agent", metavar="A", help="only this agent's cards ('' unassigned)")
    action("show", "one card with its comments, events and attempts")
    assign = action("assign", "give it to an agent ('' unassigns); stops a run in progress")
    assign.add_argument("agent", metavar="AGENT")
    priority = action("priority", "change its priority")
    priority.add_argument("priority", metavar="N", help="-100..100, higher first")
    comment = action("comment", "add a comment (its assignee reads it when it runs)")
    comment.add_argument("text", metavar="TEXT")
    action("cancel", "cancel an open card; a run in progress is stopped")
    action("reopen", "put a blocked, done or cancelled card back to todo")


class _BadInput(Exception):
    """A user error found before the board is asked (exit 2)."""


def _fail(args: argparse.Namespace, message: str | Exception, code: int = EXIT_USAGE) -> int:
    print(error_line(f"board {args.board_command}", message), file=sys.stderr)
    return code


def _priority(text: str, where: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise _BadInput(f"{where} {text!r}: not a whole number") from None
    low, high = PRIORITY_RANGE
    if not low <= value <= high:
        raise _BadInput(f"{where} {value}: must be from {low} to {high}")
    return value


def _check(args: argparse.Namespace) -> None:
    """What can be told wrong without the runtime (raises _BadInput)."""
    if args.board_command == "add":
        if not args.title.strip():
            raise _BadInput("TITLE is empty")
        if args.priority is not None:
            _priority(args.priority, "--priority")
        if args.depends_on is not None:
            deps = [d.strip() for d in args.depends_on.split(",")]
            if not all(deps):
                raise _BadInput(f"--depends-on {args.depends_on!r}: an empty id in the list")
    elif args.board_command == "list":
        if args.status not in STATUS_WORDS:
            raise _BadInput(f"--status {args.status!r}: use {'|'.join(STATUS_WORDS)}")
    elif args.board_command == "priority":
        _priority(args.priority, "N")
    elif args.board_command == "comment" and not args.text.strip():
        raise _BadInput("TEXT is empty")
    if getattr(args, "id", None) is not None and not args.id.strip():
        raise _BadInput("ID is empty")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk board ACTION` (the exit code)."""
    if args.board_command not in ACTIONS:
        print("habakkuk: board: give an action: " + ", ".join(ACTIONS), file=sys.stderr)
        return EXIT_USAGE
    try:
        _check(args)
    except _BadInput as exc:
        return _fail(args, str(exc))
    import asyncio  # not at module level: `habakkuk --help` builds this parser

    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    from habakkuk.engine.errors import ConfigError, HabakkukError, NotFound
    from habakkuk.runtime import Runtime

    runtime = await Runtime.open()
    try:
        try:
            return await _run(runtime.board, runtime.config, args)
        except _BadInput as exc:
            return _fail(args, str(exc))
        except ConfigError:
            raise  # entry.main prints it
        except NotFound as exc:  # no such card (or dependency, parent, agent)
            return _fail(args, exc, exit_code(exc))
        except HabakkukError as exc:  # BoardRefused, bad input, an ambiguous prefix
            return _fail(args, exc)
    finally:
        await runtime.close()


def _out(data: Any) -> None:
    import json

    print(json.dumps(data, ensure_ascii=False, indent=2))


def _deliver_to(text: str, config: Config) -> str:
    """`--deliver` checked: CHANNEL:CHAT[:THREAD] whose CHANNEL is a configured account."""
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.work.service import parse_deliver_to

    try:
        channel, _chat, _thread = parse_deliver_to(text.strip())
    except HabakkukError as exc:
        raise _BadInput(f"--deliver: {exc}") from None
    if channel not in config.channels:
        known = ", ".join(sorted(config.channels)) or "none configured"
        raise _BadInput(f"--deliver {text!r}: no channel account {channel!r} ({known})")
    return text.strip()


def _show(card: Card, as_json: bool) -> None:
    from habakkuk.work.board_text import detail
    from habakkuk.work.board_views import card_json

    if as_json:
        _out(card_json(card))
    else:
        print("\n".join(detail(card)))


async def _run(board: BoardAccess, config: Config, args: argparse.Namespace) -> int:
    from habakkuk.work.board_text import state_line, table
    from habakkuk.work.board_types import USER, NewCard
    from habakkuk.work.board_views import card_json

    action = args.board_command
    if action == "add":
        new = NewCard(
            title=args.title.strip(),
            body=(args.body or "").strip(),
            assignee=(args.to or "").strip(),
            priority=_priority(args.priority, "--priority") if args.priority is not None else 0,
            parent=args.parent.strip() if args.parent else None,
            depends_on=tuple(d.strip() for d in (args.depends_on or "").split(",") if d.strip()),
            deliver_to=_deliver_to(args.deliver, config) if args.deliver else None,
        )
        card = await board.create(new, by=USER)  # the card read back
        if args.json:
            _out(card_json(card))
        else:
            print(card.id)
            print(state_line(card), file=sys.stderr)
        return EXIT_OK
    if action == "list":
        assignee = args.agent.strip() if args.agent is not None else None
        cards = await board.list_cards(status=args.status, assignee=assignee)
        if args.json:
            _out({"cards": [card_json(c, history=False) for c in cards]})
            return EXIT_OK
        for line in table(cards):
            print(line)
        print(t("cli.board.count", count=len(cards)), file=sys.stderr)
        return EXIT_OK
    card = await board.get(args.id.strip())  # NotFound; a prefix resolved once
    if action == "show":
        _show(card, args.json)
        return EXIT_OK
    # Every change returns the card the board holds after it (BoardAccess reads it back).
    if action == "assign":
        now = await board.assign(card.id, args.agent.strip(), by=USER)
    elif action == "priority":
        now = await board.set_priority(card.id, _priority(args.priority, "N"), by=USER)
    elif action == "comment":
        now = await board.comment(card.id, args.text.strip(), by=USER)
    elif action == "cancel":
        now = await board.cancel(card.id, by=USER)
    else:
        now = await board.reopen(card.id, by=USER)
    if args.json:
        _out(card_json(now))
    else:
        print(state_line(now))
    return EXIT_OK
