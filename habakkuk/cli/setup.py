"""`habakkuk setup`: an interactive first-run (or re-run) wizard; `habakkuk init`: the
commented starter config (the offline demo).

It asks for the provider (Anthropic, OpenAI, OpenRouter, any OpenAI-compatible
server, Google Gemini, or the offline demo), the key (hidden input),
checks the key with one cheap request (the model list) and on a failure says why
and offers to save anyway or retry, then asks for the model and the
workspace; stores the key in the OS keyring when one is usable and otherwise
in HOME/.env (mode 0600, other lines kept); builds the config, keeping the
rest of an existing one, validates it with the real config loader before
writing anything, and keeps the previous file as config.yaml.bak. It then
offers to add a chat channel (habakkuk.cli.setup_channel; `habakkuk setup
channel [TYPE]` runs that step alone), and runs `habakkuk doctor`.

The choices, the key check and the config writing are the setup screen's too
(habakkuk.services.setup); this module is the questions on a terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.home import Home
    from habakkuk.services.setup import Choice, SetupAccess

Ask = Callable[[str], str]


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `habakkuk init` and `habakkuk setup`."""
    if command == "init":
        parser.add_argument("--force", action="store_true", help="replace an existing config")
        return
    parser.add_argument(
        "step",
        nargs="?",
        choices=["channel"],
        help="only this step: channel (add a chat channel to the config)",
    )
    parser.add_argument(
        "platform",
        nargs="?",
        metavar="TYPE",
        help="with channel: the platform (telegram, slack, discord, ...; default: asked)",
    )
    parser.add_argument(
        "--name", default="", help="the channel account's name in config.yaml (default: TYPE)"
    )
    parser.add_argument(
        "--base-url",
        default="",
        metavar="URL",
        help="the chat platform's API root, for a self-hosted server (default: its own)",
    )


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk init` or `habakkuk setup` (the exit code)."""
    return init(args) if args.command == "init" else setup(args)


def init(args: argparse.Namespace) -> int:
    """Write the starter config (offline demo) into the home."""
    from habakkuk.engine.starter import STARTER_CONFIG

    home = current_home()
    path = home.config_path
    if path.exists() and not args.force:
        print(f"habakkuk: {t('cli.init.exists', path=path)}", file=sys.stderr)
        return EXIT_USAGE
    home.prepare()
    if path.exists():
        path.replace(path.with_name("config.yaml.bak"))
    path.write_text(STARTER_CONFIG, encoding="utf-8")
    os.chmod(path, 0o600)
    print(t("cli.init.wrote", path=path))
    return EXIT_OK


def setup(args: argparse.Namespace) -> int:
    """`habakkuk setup`: the interactive wizard, the chat channel offer, then `habakkuk
    doctor`; `habakkuk setup channel [TYPE]`: the channel step alone."""
    from habakkuk.cli import doctor

    if args.step == "channel":
        from habakkuk.cli.setup_channel import run_channel_setup

        return run_channel_setup(
            current_home(), args.platform or "", name=args.name, base_url=args.base_url
        )
    if run_setup(current_home(), channel_base_url=args.base_url, channel_name=args.name) != EXIT_OK:
        return EXIT_FAILED
    print("\n" + t("cli.setup.checking"))
    return doctor.main(args)


class SetupAborted(Exception):
    """The user ended input (EOF) or gave up on a question."""


class Wizard:
    """The questions, with input functions that tests can replace; the writing is
    services.setup's (`setup`, a SetupAccess)."""

    def __init__(
        self,
        home: Home,
        ask: Ask | None = None,
        ask_secret: Ask | None = None,
        out: Callable[[str], None] | None = None,
    ):
        import getpass

        from habakkuk.services.setup import ProviderSetup

        self.home = home
        self.ask = ask or input
        self.ask_secret = ask_secret or getpass.getpass
        self.out = out or print
        self.setup: SetupAccess = ProviderSetup(home, self.out)

    # -- questions -----------------------------------------------------------------------

    def _prompt(self, question: str, default: str = "", secret: bool = False) -> str:
        suffix = f" [{default}]" if default else ""
        try:
            answer = (self.ask_secret if secret else self.ask)(f"{question}{suffix}: ")
        except EOFError:
            raise SetupAborted("input ended") from None
        return answer.strip() or default

    def choose_provider(self) -> Choice:
        """Ask which provider until the answer is one of the numbers."""
        from habakkuk.services.setup import CHOICES

        self.out(t("cli.setup.which_provider"))
        for number, choice in enumerate(CHOICES, start=1):
            self.out(f"  {number}. {choice.title}")
        for _ in range(5):
            answer = self._prompt(t("cli.setup.provider_number"), "1")
            if answer.isdigit() and 1 <= int(answer) <= len(CHOICES):
                choice = CHOICES[int(answer) - 1]
                if choice.missing:
                    missing = t(
                        "cli.setup.provider_missing", label=choice.label, missing=choice.missing
                    )
                    self.out(f"  {missing}")
                    continue
                return choice
            self.out("  " + t("cli.setup.number_range", last=len(CHOICES)))
        raise SetupAborted("no provider chosen")

    def ask_base_url(self) -> str:
        """The URL of an OpenAI-compatible server (ending in /v1 as a rule)."""
        for _ in range(5):
            url = self._prompt(t("cli.setup.server_url"))
            if url.startswith(("http://", "https://")) and len(url) > len("https://"):
                return url.rstrip("/")
            self.out("  " + t("cli.setup.bad_url"))
        raise SetupAborted("no server URL given")

    def ask_key(self, choice: Choice) -> str:
        """The key (hidden); optional servers accept an empty answer."""
        question = t("cli.setup.key_optional" if choice.key_optional else "cli.setup.key")
        for _ in range(5):
            key = self._prompt(question, secret=True)
            if key or choice.key_optional:
                return key
            self.out("  " + t("cli.setup.key_needed"))
        raise SetupAborted("no key given")

    def checked_key(self, choice: Choice, base_url: str | None) -> str:
        """Ask for the key and check it; on a failure say why, then save anyway or retry."""
        import asyncio

        from habakkuk.services.setup import check_key

        for _ in range(5):
            key = self.ask_key(choice) if choice.key_env else ""
            if choice.is_demo:
                return key
            self.out("  " + t("cli.setup.checking_key"))
            result = asyncio.run(check_key(choice, key, base_url))
            if result.ok:
                self.out("  " + t("cli.setup.key_works"))
                return key
            self.out("  " + t("cli.setup.check_failed", reason=result.reason))
            answer = self._prompt(t("cli.setup.save_anyway"), "n")
            if answer.lower() in ("y", "yes"):
                return key
        raise SetupAborted("no working key given")

    def ask_model(self, choice: Choice) -> str:
        for _ in range(5):
            model = self._prompt(t("cli.setup.model"), choice.default_model)
            if model and not model.startswith("/") and " " not in model:
                return model
            example = choice.default_model or "llama3.1"
            self.out("  " + t("cli.setup.bad_model", example=example))
        raise SetupAborted("no model given")

    def ask_workspace(self) -> str:
        from habakkuk.services.setup import AGENT

        default = str(self.home.default_workspace(AGENT))
        for _ in range(5):
            answer = self._prompt(t("cli.setup.workspace"), default)
            path = Path(answer).expanduser()
            if path.exists() and not path.is_dir():
                self.out("  " + t("cli.setup.not_a_folder", path=path))
                continue
            return str(path if path.is_absolute() else Path.cwd() / path)
        raise SetupAborted("no workspace given")

    # -- the whole run -------------------------------------------------------------------

    def run(self) -> int:
        """Ask, validate, store and write; returns an exit code."""
        self.out(t("cli.setup.start", root=self.home.root) + "\n")
        choice = self.choose_provider()
        base_url = self.ask_base_url() if choice.asks_base_url else None
        key = self.checked_key(choice, base_url)
        model = self.ask_model(choice)
        workspace = self.ask_workspace()
        text = self.setup.build_config(choice, base_url, bool(key), model, workspace)
        if key and choice.key_env:
            where = self.setup.store_key(choice.key_env, key)
            self.out(t("cli.setup.stored_key", name=choice.key_env, where=where))
            current = os.environ.get(choice.key_env)
            if current and current != key:
                self.out(t("cli.setup.key_in_environment", name=choice.key_env))
        self.setup.write_config(text)
        Path(workspace).mkdir(parents=True, exist_ok=True)
        self.out(t("cli.setup.wrote", path=self.home.config_path))
        return EXIT_OK


def run_setup(
    home: Home,
    ask: Ask | None = None,
    ask_secret: Ask | None = None,
    channel_base_url: str = "",
    channel_name: str = "",
) -> int:
    """Run the wizard on `home`, then offer a chat channel (habakkuk.cli.setup_channel); a
    user who ends input gets a one-line message."""
    from habakkuk.cli.setup_channel import ChannelWizard

    wizard = Wizard(home, ask, ask_secret)
    try:
        code = wizard.run()
    except SetupAborted as exc:
        print(error_line("setup", t("cli.setup.stopped", reason=exc)), file=sys.stderr)
        return EXIT_FAILED
    channels = ChannelWizard(
        home,
        wizard.ask,
        wizard.ask_secret,
        wizard.out,
        base_url=channel_base_url,
        name=channel_name,
        backup=False,  # the provider step kept the person's config as config.yaml.bak
    )
    channels.offer()
    return code
