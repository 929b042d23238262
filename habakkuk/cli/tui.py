"""`habakkuk` with no command: the terminal app (`--resume` opens the session picker first)."""

from __future__ import annotations

import argparse

from habakkuk.cli.common import current_home


def main(args: argparse.Namespace) -> int:
    """`habakkuk`: the terminal app (`--resume` opens the session picker first)."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.home import check_home_root, read_env_file

    home = current_home()
    check_home_root(home.root)
    config = None
    if home.config_path.exists():
        # A bad config is one line on the terminal, not a crash inside the full-screen app;
        # the app's runtime opens with this config instead of reading the file again.
        config = load_config(home)
        config.agent(None)
    read_env_file(home.env_path)  # likewise a .env that is not UTF-8 (ConfigError)
    from habakkuk.app import run_app

    return run_app(resume=bool(getattr(args, "resume", False)), config=config)
