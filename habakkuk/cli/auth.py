"""`habakkuk auth`: subscription logins (ChatGPT, GitHub Copilot) in HOME/auth.json.

`auth login chatgpt|copilot` runs the service's device flow; `auth status` (also `auth`
alone) says who is signed in and until when; `auth logout [KIND]` forgets one login or
both. The work is in habakkuk.engine.llm.logins, imported when the command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_OK

if TYPE_CHECKING:
    from habakkuk.engine.config import AuthConfig
    from habakkuk.engine.home import Home

KINDS = ("chatgpt", "copilot")  # engine/llm/logins/common.py's, kept here for --help


def add_arguments(command: str, auth: argparse.ArgumentParser) -> None:
    """Declare `habakkuk auth login|status|logout`."""
    actions = auth.add_subparsers(dest="auth_command", metavar="ACTION")
    login = actions.add_parser("login", help="sign in with a device code")
    login.add_argument("kind", choices=KINDS)
    actions.add_parser("status", help="who is signed in, until when, in which file")
    logout = actions.add_parser("logout", help="forget a login (default: both)")
    logout.add_argument("kind", nargs="?", choices=KINDS)


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk auth ACTION` (the exit code)."""
    from habakkuk.engine.llm.logins import commands

    home = current_home()
    action = getattr(args, "auth_command", None) or "status"
    if action == "login":
        settings = _settings(home)
        run_async(commands.sign_in(args.kind, settings, home.root, _say))
    elif action == "logout":
        kinds = [args.kind] if args.kind else list(KINDS)
        for line in run_async(commands.sign_out(kinds, home.root)):
            print(line)
    else:
        for line in commands.status_lines(_settings(home), home.root):
            print(line)
    return EXIT_OK


def _say(line: str) -> None:
    print(line, flush=True)


def _settings(home: Home) -> AuthConfig:
    """Config `auth:` (the endpoints); the real ones when there is no config yet."""
    from habakkuk.engine.config import AuthConfig, load_config

    if not home.config_path.exists():
        return AuthConfig()
    return load_config(home).auth
