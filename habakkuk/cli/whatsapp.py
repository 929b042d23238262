"""`habakkuk whatsapp link [--account NAME]`: pair a WhatsApp account's device by QR code."""

from __future__ import annotations

import argparse


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare `habakkuk whatsapp link [--account NAME]`."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    link = actions.add_parser("link", help="show the pairing QR code and wait until scanned")
    link.add_argument(
        "--account", metavar="NAME", help="the whatsapp channel (default: the only one)"
    )


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk whatsapp link` (the exit code)."""
    from habakkuk.channels.whatsapp_commands import link_account
    from habakkuk.cli.common import current_home, run_async

    return run_async(link_account(current_home(), args.account, print))
