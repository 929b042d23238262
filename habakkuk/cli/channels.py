"""`habakkuk channels`, `habakkuk pair CODE` and `habakkuk send`: the chat channels from the
shell (habakkuk.channels.commands does the work)."""

from __future__ import annotations

import argparse

from habakkuk.cli.common import current_home, run_async


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk channels`, `habakkuk pair` or `habakkuk send`."""
    if command == "channels":
        parser.add_argument(
            "--json", action="store_true", help="print a JSON array, one record per account"
        )
    elif command == "pair":
        parser.add_argument("code")
    elif command == "send":
        parser.add_argument("--to", required=True, metavar="CHANNEL:CHAT[:THREAD]")
        parser.add_argument("--file", metavar="PATH", help="send this file (TEXT is its caption)")
        parser.add_argument("text", nargs="*", help="the message")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk channels`, `pair` or `send` (the exit code)."""
    commands = {"channels": channels, "pair": pair, "send": send}
    return commands[args.command](args)


def channels(args: argparse.Namespace) -> int:
    """`habakkuk channels`: each channel's health from control.db."""
    from habakkuk.channels.commands import channels_status

    return run_async(channels_status(current_home(), as_json=args.json))


def pair(args: argparse.Namespace) -> int:
    """`habakkuk pair CODE`: approve a chat user's pairing code."""
    from habakkuk.channels.commands import pair as approve

    return run_async(approve(current_home(), args.code))


def send(args: argparse.Namespace) -> int:
    """`habakkuk send --to CHANNEL:CHAT[:THREAD] [--file PATH] TEXT`: queue a delivery."""
    from habakkuk.channels.commands import send as queue_send

    return run_async(queue_send(current_home(), args.to, " ".join(args.text), args.file))
