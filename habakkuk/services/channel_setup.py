"""Adding a chat channel: what `habakkuk setup channel` (habakkuk.cli.setup_channel) and
the setup screen's channel form (habakkuk.screens.channel_setup) share, below both.

Built over the platform registry (habakkuk.channels.platforms), so a platform whose module
is registered there appears here with no change: its `SETUP` says what to create on the
platform's side and which answers to ask. The steps:

- `platforms()`: each platform's type and title (its module imported now, and only here);
  one whose optional package is missing is listed with the `pip install` line.
- `ChannelSetup.prepare(plan)`: the answers become `channels.<name>` (settings, the
  platform's fixed settings, the `*_env` variable names; `allow_from` a list) on the
  existing config, whose other parts are kept; the new text is validated by the real
  config loader, which also gives the draft account the check gets. Nothing is written.
- `check(draft)`: the platform's own check (bounded in time), after its link flow when it
  has one (WhatsApp: `show` gets the pairing code); a refusal or any other failure is
  one line, with the typed secrets blanked out of it.
- `ChannelSetup.save(draft)`: each secret into HOME/.env (0600, other lines kept; the
  adapters read their secrets from the environment and .env, not the keyring), then the
  config (the previous file kept as config.yaml.bak). A secret never goes into the config.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home, ensure_private_dir, read_text_file
from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    from habakkuk.channels.platforms import PlatformSetup, SetupField
    from habakkuk.engine.channel_config import ChannelConfig

CHECK_TIMEOUT = 30.0  # seconds for a platform's check (one or two requests)
LINK_TIMEOUT = 300.0  # seconds to link a device (the person scans a code meanwhile)
NAME = re.compile(r"[A-Za-z0-9_-]+")
HEADER = "# Written by `habakkuk setup`; the previous file is config.yaml.bak.\n"


class ChannelSetupError(Exception):
    """An answer or the config cannot make a channel: one line saying what and where."""


@dataclass(frozen=True)
class PlatformChoice:
    """One platform the setup offers; `missing` is the `pip install` line when its
    optional package is not installed ("" when it can be set up here)."""

    type: str
    title: str
    missing: str = ""

    @property
    def label(self) -> str:
        """The title, with what is missing when something is."""
        return f"{self.title} ({self.missing})" if self.missing else self.title


def platforms() -> list[PlatformChoice]:
    """Every registered platform, in the registry's order (modules imported now)."""
    from habakkuk.channels.adapter import FatalAdapterError
    from habakkuk.channels.platforms import PLATFORM_MODULES, platform_module

    found: list[PlatformChoice] = []
    for kind in PLATFORM_MODULES:
        try:
            setup = platform_module(kind).SETUP
        except FatalAdapterError as exc:
            hint = str(exc).partition(": ")[2] or str(exc)
            found.append(PlatformChoice(kind, kind.capitalize(), hint))
            continue
        found.append(PlatformChoice(kind, setup.title))
    return found


def platform_setup(kind: str) -> PlatformSetup:
    """The setup step of platform `kind`; ChannelSetupError when there is no such platform
    or its package is missing."""
    from habakkuk.channels.adapter import FatalAdapterError
    from habakkuk.channels.platforms import PLATFORM_MODULES, platform_module

    if kind not in PLATFORM_MODULES:
        known = ", ".join(PLATFORM_MODULES)
        raise ChannelSetupError(f"no chat platform is called {kind!r} (platforms: {known})")
    try:
        return platform_module(kind).SETUP
    except FatalAdapterError as exc:
        raise ChannelSetupError(str(exc)) from None


def required(setup: PlatformSetup, item: SetupField) -> bool:
    """Whether the platform cannot work without this answer."""
    from habakkuk.engine.channel_config import PLATFORM_SETTINGS

    return item.key in PLATFORM_SETTINGS[setup.type].required


def takes_base_url(setup: PlatformSetup) -> bool:
    """Whether the platform accepts an API root its fields do not already ask for (a
    self-hosted server, or a test double)."""
    from habakkuk.engine.channel_config import PLATFORM_SETTINGS

    asked = {item.key for item in setup.fields}
    return "base_url" in PLATFORM_SETTINGS[setup.type].accepted and "base_url" not in asked


@dataclass(frozen=True)
class ChannelPlan:
    """What the person asked for: the platform, the account's name, the answers by field
    key (secrets too), an optional API root, and whether an account of that name may be
    replaced."""

    setup: PlatformSetup
    name: str
    answers: Mapping[str, str]
    base_url: str = ""
    replace: bool = False


@dataclass(frozen=True)
class Draft:
    """A plan made into config: the account as the loader read it, the new config text,
    and the secrets to store, by variable. Nothing of it is written yet."""

    plan: ChannelPlan
    config: ChannelConfig
    text: str
    secrets: Mapping[str, str]
    # where the account's name was already taken (its type), when it is being replaced
    replaces: str = ""


@dataclass(frozen=True)
class CheckResult:
    """How the check went: `ok` and who we are on the platform, else the one-line reason."""

    ok: bool
    who: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Saved:
    """What `save` wrote: each secret's variable and where it went, and notes to show."""

    stored: Mapping[str, str]
    notes: tuple[str, ...] = field(default_factory=tuple)


class ChannelSetupAccess(Protocol):
    """What `habakkuk setup channel` and the channel form use to add an account to a home."""

    def existing(self) -> dict[str, str]:
        """The channel accounts of the config: name -> type (ChannelSetupError: none)."""
        ...

    def prepare(self, plan: ChannelPlan) -> Draft:
        """The plan as config, validated; nothing written (ChannelSetupError: why not)."""
        ...

    def save(self, draft: Draft) -> Saved:
        """The secrets into HOME/.env, then the config (config.yaml.bak kept)."""
        ...


class ChannelSetup:
    """The channel step for one home (a ChannelSetupAccess): prepare a plan, then save it
    (after `check`)."""

    def __init__(self, home: Home, *, backup: bool = True) -> None:
        self.home = home
        # False within the whole `habakkuk setup`: its provider step already kept the
        # person's own config as config.yaml.bak, which this step must not replace.
        self.backup = backup

    # -- reading the existing config --------------------------------------------------------

    def _old_data(self) -> dict[str, Any]:
        """The current config as YAML data; ChannelSetupError when there is none yet or
        it does not validate (a channel is added to a working config)."""
        import yaml

        from habakkuk.engine.config import parse_config

        path = self.home.config_path
        try:
            text = read_text_file(path)
        except FileNotFoundError:
            raise ChannelSetupError(
                f"{path}: no config yet; run `habakkuk setup` first (a channel needs an "
                "agent to answer)"
            ) from None
        except OSError as exc:
            raise ChannelSetupError(f"{path}: cannot read: {exc.strerror}") from None
        except ConfigError as exc:
            raise ChannelSetupError(str(exc)) from None
        try:
            parse_config(text, path, self.home)
        except ConfigError as exc:
            raise ChannelSetupError(f"fix the config first: {exc}") from None
        data = yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ChannelSetupError(f"{path}: not a mapping of settings")
        return data

    def existing(self) -> dict[str, str]:
        """The channel accounts of the current config: name -> type. ChannelSetupError
        when there is no config yet or it does not validate (asked first, so the person
        hears it before answering anything)."""
        channels = self._old_data().get("channels")
        if not isinstance(channels, dict):
            return {}
        return {
            str(name): str(entry.get("type", "?")) if isinstance(entry, dict) else "?"
            for name, entry in channels.items()
        }

    # -- the plan made into config ----------------------------------------------------------

    def prepare(self, plan: ChannelPlan) -> Draft:
        """The answers as `channels.<name>` on the existing config, validated by the real
        loader; ChannelSetupError says what is wrong (nothing is written)."""
        import yaml

        from habakkuk.engine.config import parse_config

        setup = plan.setup
        name = plan.name
        if not NAME.fullmatch(name):
            raise ChannelSetupError(
                f"channel name {name!r}: use letters, digits, - and _ only (e.g. {setup.type})"
            )
        data = self._old_data()
        channels = data.get("channels")
        channels = channels if isinstance(channels, dict) else {}
        old = channels.get(name)
        replaces = ""
        if old is not None:
            replaces = str(old.get("type", "?")) if isinstance(old, dict) else "?"
            if not plan.replace:
                raise ChannelSetupError(
                    f"channels.{name} exists (a {replaces} channel): choose another name "
                    "or replace it"
                )
        taken = _variables_of(
            {other: entry for other, entry in channels.items() if other != name},
            data.get("providers"),
        )
        entry: dict[str, Any] = {"type": setup.type}
        if isinstance(old, dict) and old.get("type") == setup.type:
            # Replacing an account of the same platform keeps what setup does not ask
            # (its agent, routes, durations); the platform's own settings are asked again.
            entry.update(old)
        for key, value in setup.fixed.items():
            entry.setdefault(key, value)  # a replaced account keeps its own choice
        secrets: dict[str, str] = {}
        for item in setup.fields:
            answer = plan.answers.get(item.key, "").strip()
            if item.secret:
                if not answer:
                    if required(setup, item):
                        raise ChannelSetupError(f"{item.prompt}: needed")
                    entry.pop(item.key, None)
                    continue
                variable = _variable(item, name, setup.type, taken)
                entry[item.key] = variable
                secrets[variable] = answer
                continue
            answer = answer or item.default
            if not answer:
                if required(setup, item):
                    raise ChannelSetupError(f"{item.prompt}: needed")
                entry.pop(_file_key(item.key), None)
                continue
            entry[_file_key(item.key)] = _value(item.key, answer)
        base_url = plan.base_url.strip().rstrip("/")
        if base_url:
            if not takes_base_url(setup):
                raise ChannelSetupError(f"a {setup.type} channel takes no API root (base_url)")
            entry["base_url"] = base_url
        channels[name] = entry
        data["channels"] = channels
        text = HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        try:
            config = parse_config(text, self.home.config_path, self.home)
        except ConfigError as exc:
            raise ChannelSetupError(self._without_place(str(exc))) from None
        return Draft(plan, config.channels[name], text, secrets, replaces)

    def _without_place(self, message: str) -> str:
        """A loader error about the draft without "config.yaml:LINE: " (not written yet)."""
        prefix = f"{self.home.config_path}:"
        if message.startswith(prefix):
            return re.sub(r"^\d+: ", "", message[len(prefix) :])
        return message

    # -- writing -----------------------------------------------------------------------------

    def save(self, draft: Draft) -> Saved:
        """Store each secret in HOME/.env (0600), then write the config (the old file kept
        as config.yaml.bak). The plan is made into config again first, on the file as it
        is now: an edit made while the platform was asked is kept too. Raises
        ChannelSetupError when it no longer fits, ConfigError or OSError when a file
        cannot be written."""
        import os

        from habakkuk.services.setup import ProviderSetup

        draft = self.prepare(draft.plan)
        writer = ProviderSetup(self.home, out=lambda line: None)
        self.home.prepare()
        stored: dict[str, str] = {}
        notes: list[str] = []
        for variable, value in draft.secrets.items():
            writer.write_env(variable, value)
            stored[variable] = str(self.home.env_path)
            current = os.environ.get(variable)
            if current and current != value:
                notes.append(
                    f"{variable} is also set in your environment, and that value wins; "
                    "unset it to use the new one"
                )
        writer.write_config(draft.text, backup=self.backup)
        return Saved(stored, tuple(notes))


async def check(
    draft: Draft,
    home: Home,
    show: Callable[[str], None] = lambda text: None,
    *,
    timeout: float = CHECK_TIMEOUT,
    link_timeout: float = LINK_TIMEOUT,
) -> CheckResult:
    """Ask the platform whether the answers work: its link flow first when it has one
    (`show` gets what to display, e.g. the pairing code), then its check, each bounded in
    time. Never raises for the platform's sake: every failure is the one-line reason."""
    from habakkuk.channels.platforms import SetupCheckFailed

    setup = draft.plan.setup
    try:
        if setup.link is not None:
            ensure_private_dir(home.channels_dir)
            await wait_within(setup.link(draft.config, home.channels_dir, show), link_timeout)
        who = await wait_within(setup.check(draft.config, draft.secrets), timeout)
    except SetupCheckFailed as exc:
        return CheckResult(False, reason=_one_line(str(exc), draft.secrets))
    except TimeoutError:
        return CheckResult(False, reason=f"no answer from {setup.title} in time")
    except Exception as exc:  # a platform's failure of any kind is the reason shown
        text = _one_line(str(exc), draft.secrets)
        return CheckResult(False, reason=f"{type(exc).__name__}: {text}" if text else repr(exc))
    return CheckResult(True, who=_one_line(str(who), draft.secrets))


def check_in_thread(
    draft: Draft, home: Home, show: Callable[[str], None] = lambda text: None
) -> CheckResult:
    """`check` on an event loop of its own, for a thread: a platform's check that blocks
    (a library without asyncio) then stalls that thread, never the caller's loop (the
    terminal app). `show` is called from that thread."""
    import asyncio

    return asyncio.run(check(draft, home, show))


def _one_line(text: str, secrets: Mapping[str, str]) -> str:
    """`text` on one line, at most 300 characters, with the typed secrets blanked (a
    library's error may quote the URL the token is part of)."""
    for value in secrets.values():
        if len(value) >= 4:  # a shorter one is no token, and blanking it would garble the line
            text = text.replace(value, "***")
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"


def _variable(item: SetupField, name: str, kind: str, taken: set[str]) -> str:
    """The variable a secret is stored under: the platform's own name for the account
    named after the platform, else that name with the account's (TELEGRAM_BOT_TOKEN_WORK),
    so a second account never overwrites the first one's secret."""
    base = item.variable or item.key.removesuffix("_env").upper()
    suffix = re.sub(r"[^A-Za-z0-9]", "_", name).upper()
    variable = base if name == kind and base not in taken else f"{base}_{suffix}"
    if variable in taken:
        raise ChannelSetupError(
            f"{item.prompt}: the variable {variable} is another account's; choose another name"
        )
    return variable


def _variables_of(channels: Mapping[Any, Any], providers: object) -> set[str]:
    """Every variable the other accounts and the providers name (`*_env` settings)."""
    found: set[str] = set()
    sections = list(channels.values())
    if isinstance(providers, dict):
        sections += list(providers.values())
    for entry in sections:
        if isinstance(entry, dict):
            found.update(
                str(value) for key, value in entry.items() if str(key).endswith("_env") and value
            )
    return found


def _file_key(key: str) -> str:
    """How config.yaml spells a setting (`from` for the field `from_`, a Python keyword)."""
    from habakkuk.engine.channel_config import ChannelConfig

    spelled = {item.name: item.metadata.get("key", item.name) for item in fields(ChannelConfig)}
    return str(spelled.get(key, key))


def _value(key: str, answer: str) -> object:
    """An answer as its setting's type: allow_from a list (commas or spaces between ids),
    a yes/no setting a boolean, a number an int; anything else the text as typed."""
    from habakkuk.engine.channel_config import ChannelConfig

    kinds = {item.name: str(item.type) for item in fields(ChannelConfig)}
    kind = kinds.get(key, "str")
    if key == "allow_from" or kind.startswith("list"):
        return [item for item in re.split(r"[,\s]+", answer) if item]
    lowered = answer.lower()
    if "bool" in kind and lowered in ("true", "yes", "false", "no", "off", "on"):
        return lowered in ("true", "yes", "on")
    if kind == "int" and answer.isdigit():
        return int(answer)
    return answer
