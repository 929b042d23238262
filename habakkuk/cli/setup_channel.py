"""The chat channel step of `habakkuk setup` (offered after the provider step) and
`habakkuk setup channel [TYPE]` (that step alone).

It lists the platforms the registry knows (habakkuk.channels.platforms), prints the
chosen one's instructions (what to create on its side, which token goes where), asks its
fields (a secret with hidden input), checks the answers with the platform (a linked
device shows its pairing code first), and on a failure says why and offers to enter them
again, save anyway or skip. The building, checking and writing are
habakkuk.services.channel_setup's, shared with the setup screen; this module is the
questions on a terminal. Input that ends (EOF: a pipe, /dev/null) stops the questions and
writes nothing for the channel.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from habakkuk.channels.platforms import PlatformSetup
    from habakkuk.engine.home import Home
    from habakkuk.services.channel_setup import ChannelSetupAccess, Draft

Ask = Callable[[str], str]
TRIES = 5


class ChannelAborted(Exception):
    """Input ended, or the answers never made a channel."""


class ChannelSkipped(Exception):
    """The person chose to skip the channel after a failed check."""


class ChannelWizard:
    """The channel questions, with input functions tests replace."""

    def __init__(
        self,
        home: Home,
        ask: Ask | None = None,
        ask_secret: Ask | None = None,
        out: Callable[[str], None] | None = None,
        *,
        base_url: str = "",
        name: str = "",
        backup: bool = True,
    ) -> None:
        import getpass

        from habakkuk.services.channel_setup import ChannelSetup

        self.home = home
        self.ask = ask or input
        self.ask_secret = ask_secret or getpass.getpass
        self.out = out or print
        self.base_url = base_url
        self.name = name
        # backup=False after the provider step: config.yaml.bak keeps the person's file
        self.service: ChannelSetupAccess = ChannelSetup(home, backup=backup)

    def _prompt(self, question: str, default: str = "", secret: bool = False) -> str:
        suffix = f" [{default}]" if default else ""
        try:
            answer = (self.ask_secret if secret else self.ask)(f"{question}{suffix}: ")
        except EOFError:
            raise ChannelAborted("input ended") from None
        return answer.strip() or default

    def _yes(self, question: str) -> bool:
        return self._prompt(f"{question} [y/N]").lower() in ("y", "yes")

    # -- the questions -------------------------------------------------------------------

    def choose_platform(self) -> PlatformSetup:
        """Ask which platform until the answer is one of the numbers (or a type)."""
        from habakkuk.services.channel_setup import platform_setup, platforms

        offered = platforms()
        self.out("Which chat platform?")
        for number, choice in enumerate(offered, start=1):
            self.out(f"  {number}. {choice.label}")
        for _ in range(TRIES):
            answer = self._prompt("Platform number", "1")
            picked = [c for c in offered if c.type == answer.lower()]
            if answer.isdigit() and 1 <= int(answer) <= len(offered):
                picked = [offered[int(answer) - 1]]
            if not picked:
                self.out(f"  please answer a number from 1 to {len(offered)}")
                continue
            if picked[0].missing:
                self.out(f"  {picked[0].title} {picked[0].missing}; choose another or install it")
                continue
            return platform_setup(picked[0].type)
        raise ChannelAborted("no platform chosen")

    def ask_name(self, setup: PlatformSetup, existing: dict[str, str]) -> tuple[str, bool]:
        """The account's name in config.yaml, and whether it replaces one of `existing`."""
        from habakkuk.services.channel_setup import NAME

        default = self.name or setup.type
        for _ in range(TRIES):
            name = self._prompt("Name of this account in config.yaml", default)
            if not NAME.fullmatch(name):
                self.out("  use letters, digits, - and _ only")
                continue
            if name not in existing:
                return name, False
            if self._yes(f"  channels.{name} exists (a {existing[name]} channel): replace it?"):
                return name, True
            default = ""
        raise ChannelAborted("no account name given")

    def ask_fields(self, setup: PlatformSetup) -> dict[str, str]:
        """Every field of the platform; a needed one is asked until it is answered."""
        from habakkuk.services.channel_setup import required

        answers: dict[str, str] = {}
        for item in setup.fields:
            if item.help:
                self.out(f"  ({item.help})")
            prompt = item.prompt + (" (input is hidden)" if item.secret else "")
            if not required(setup, item) and not item.default:
                prompt += " (Enter to leave it out)"
            for _ in range(TRIES):
                answer = self._prompt(prompt, item.default, secret=item.secret)
                if answer or not required(setup, item):
                    answers[item.key] = answer
                    break
                self.out("  this is needed")
            else:
                raise ChannelAborted(f"no answer for {item.prompt!r}")
        return answers

    def drafted(self, setup: PlatformSetup, name: str, replace: bool) -> Draft:
        """Ask the fields until the config loader accepts the answers."""
        from habakkuk.services.channel_setup import ChannelPlan, ChannelSetupError

        for _ in range(TRIES):
            plan = ChannelPlan(setup, name, self.ask_fields(setup), self.base_url, replace)
            try:
                return self.service.prepare(plan)
            except ChannelSetupError as exc:
                self.out(f"  {exc}")
        raise ChannelAborted("the answers never made a valid channel")

    def checked(self, setup: PlatformSetup, name: str, replace: bool) -> Draft:
        """The answers, checked with the platform; after a failure, enter them again, save
        anyway or skip (ChannelSkipped)."""
        from habakkuk.services.channel_setup import check_in_thread

        for _ in range(TRIES):
            draft = self.drafted(setup, name, replace)
            self.out(f"  checking with {setup.title}...")
            result = check_in_thread(draft, self.home, self.out)
            if result.ok:
                self.out(f"  connected as {result.who}")
                return draft
            self.out(f"  the check failed: {result.reason}")
            answer = self._prompt("Enter again, save anyway, or skip this channel? (r/s/k)", "r")
            if answer.lower() in ("s", "save"):
                return draft
            if answer.lower() in ("k", "skip"):
                raise ChannelSkipped(setup.title)
        raise ChannelAborted("the check never passed")

    # -- the whole step ------------------------------------------------------------------

    def add(self, kind: str = "") -> bool:
        """One channel, asked, checked and saved; False when skipped."""
        from habakkuk.services.channel_setup import platform_setup

        existing = self.service.existing()  # no config yet: said before any question
        setup = platform_setup(kind) if kind else self.choose_platform()
        self.out(f"\n{setup.title}:")
        for line in setup.instructions.splitlines():
            self.out(f"  {line}")
        name, replace = self.ask_name(setup, existing)
        try:
            draft = self.checked(setup, name, replace)
        except ChannelSkipped:
            self.out(f"  skipped: no {setup.title} channel written")
            return False
        saved = self.service.save(draft)
        for variable, where in saved.stored.items():
            self.out(f"stored {variable} in {where}")
        for note in saved.notes:
            self.out(f"note: {note}")
        self.out(
            f"wrote channels.{name} to {self.home.config_path}; it connects when Habakkuk "
            "next starts (habakkuk serve, or the app)"
        )
        return True

    def offer(self) -> None:
        """After the provider step: "Add a chat channel?" until the person says no (or
        input ends). A failure here leaves the provider's setup as it was saved."""
        from habakkuk.engine.errors import ConfigError
        from habakkuk.services.channel_setup import ChannelSetupError, platforms

        titles = ", ".join(choice.title for choice in platforms())
        question = f"\nAdd a chat channel ({titles})?"
        while True:
            try:
                if not self._yes(question):
                    return
                self.add()
            except ChannelAborted as exc:
                self.out(f"channel step stopped ({exc}); no channel written")
                return
            except (ChannelSetupError, ConfigError) as exc:
                self.out(f"channel step: {exc}")
                return
            except OSError as exc:
                self.out(f"channel step: {self.home.root}: cannot write: {exc.strerror}")
                return
            question = "\nAdd another chat channel?"


def run_channel_setup(
    home: Home,
    kind: str = "",
    *,
    name: str = "",
    base_url: str = "",
    ask: Ask | None = None,
    ask_secret: Ask | None = None,
) -> int:
    """`habakkuk setup channel [TYPE]`: one channel; a failure is one line on stderr."""
    from habakkuk.engine.errors import ConfigError
    from habakkuk.services.channel_setup import ChannelSetupError

    wizard = ChannelWizard(home, ask, ask_secret, base_url=base_url, name=name)
    try:
        return EXIT_OK if wizard.add(kind) else EXIT_FAILED
    except ChannelAborted as exc:
        print(f"habakkuk: setup channel: stopped ({exc}); nothing was written", file=sys.stderr)
    except (ChannelSetupError, ConfigError) as exc:
        print(f"habakkuk: setup channel: {exc}", file=sys.stderr)
    except OSError as exc:
        print(
            f"habakkuk: setup channel: {home.root}: cannot write: {exc.strerror}", file=sys.stderr
        )
    return EXIT_FAILED
