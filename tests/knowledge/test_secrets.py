"""No secrets, ever: every format is named, harmless text passes, and no write path stores one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.secret_scan import Finding, find_secret, find_secrets, luhn_valid
from habakkuk.engine.secret_shapes import secret_variables
from habakkuk.knowledge.memory_types import ProposalCreated, Provenance, SecretRefused
from habakkuk.knowledge.service import Memory

from .conftest import AGENT, REVIEW, USER
from .secrets_corpus import ENV_SECRETS, HARMLESS, SECRETS

CONFIG_NAMING_A_SECRET = """
providers:
  mock:
    type: mock
  custom:
    type: openai
    base_url: http://127.0.0.1:9/v1
    key_env: CUSTOM_SERVICE_KEY
agents:
  main:
    model: mock/scripted
  other:
    model: mock/scripted
"""


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_every_known_format_is_found_and_named_without_its_value(name: str) -> None:
    found = find_secret(SECRETS[name])
    assert found is not None, name
    assert found.startswith(("a ", "an ", "credentials", "the ")), found
    assert not any(part in found for part in SECRETS[name].split() if len(part) > 8)


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_text_hashes_paths_and_uuids_pass(text: str) -> None:
    assert find_secret(text) is None


def test_the_names_say_what_matched() -> None:
    assert find_secret(SECRETS["openai"]) == "an OpenAI key"
    assert find_secret(SECRETS["anthropic"]) == "an Anthropic key"
    assert find_secret(SECRETS["pem"]) == "a private key"
    assert find_secret(SECRETS["url credentials"]) == "credentials in a URL"
    assert find_secret(SECRETS["password assignment"]) == "a password assignment"
    assert find_secret(SECRETS["random token"]) == "a long random-looking token"
    assert find_secret(SECRETS["card spaces"]) == "a card number"
    assert find_secret("x plainpassphrase y", {"ROUTER": "plainpassphrase"}) == (
        "the value of $ROUTER"
    )
    assert find_secret("x plainpassphrase y", ["plainpassphrase"]) == (
        "the value of a secret variable"
    )
    assert find_secret("short abc", {"X": "abc"}) is None


def test_each_finding_says_where_the_secret_is_even_disguised() -> None:
    """The spans are what a log's redactor will cut out: the secret as it was written."""
    for name, core in (
        ("full-width key", "ｓｋ－ｐｒｏｊ－"),
        ("zero-width key", "\u200b"),
        ("key broken by a newline", "\n"),
        ("aws key broken by a newline", "IOSF\nODNN"),
        ("dot-separated key", ".IOSF.ODNN.7EXA."),
        ("spelled-out key", "s k - p r o j"),
        ("key body wrapped at 28", "F\nAASC"),
        ("pin", "4921"),
        ("hex signing key", "a3f02be"),
    ):
        text = SECRETS[name]
        found = find_secrets(text)
        assert found, name
        assert core in text[found[0].start : found[0].end], (name, found[0])
    two = f"first {SECRETS['openai']} then {SECRETS['pin']}"
    assert [f.what for f in find_secrets(two)] == ["an OpenAI key", "a PIN"]
    at = two.index("sk-")
    assert find_secrets(two)[0] == Finding("an OpenAI key", at, at + len(SECRETS["openai"]) - 10)
    assert find_secrets("nothing to see here") == []


def test_the_forms_that_slipped_through_are_named() -> None:
    assert find_secret(SECRETS["pem lower-case header"]) == "a private key"
    assert find_secret(SECRETS["full-width key"]) == "an OpenAI key"
    assert find_secret(SECRETS["dot-separated key"]) == "an AWS access key"
    assert find_secret(SECRETS["basic auth header"]) == "an Authorization header"
    assert find_secret("basic " + "YWRtaW46aHVudGVyMi1ibHVl") == "HTTP Basic credentials"
    assert find_secret(SECRETS["db pass env"]) == "a password assignment"
    assert find_secret(SECRETS["wifi passphrase"]) == "a passphrase"
    assert find_secret(SECRETS["pin"]) == "a PIN"
    assert find_secret(SECRETS["hex signing key"]) == "a hex key after a secret's name"


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert find_secret("card 4111 1111 1111 1112") is None


def test_the_runtime_values_are_the_config_named_and_secret_looking_env_entries(
    home: Home,
) -> None:
    config = parse_config(CONFIG_NAMING_A_SECRET, home.config_path, home)
    env_file = {
        "CUSTOM_SERVICE_KEY": "correct horse battery",
        "HOME_ROUTER_PASSWORD": "pp-12345",
        "EDITOR": "vim-nox-large",
        "SHORT_TOKEN": "abc",
    }
    values = secret_variables(config, Environment(overrides=env_file), env_file)
    assert values == {
        "CUSTOM_SERVICE_KEY": "correct horse battery",
        "HOME_ROUTER_PASSWORD": "pp-12345",
    }


async def test_no_write_path_persists_any_secret_of_the_corpus(home: Home) -> None:
    home.config_path.write_text(CONFIG_NAMING_A_SECRET, encoding="utf-8")
    home.env_path.write_text(
        "".join(f"{k}={v}\n" for k, v in ENV_SECRETS.items()), encoding="utf-8"
    )
    config = parse_config(CONFIG_NAMING_A_SECRET, home.config_path, home)
    env = Environment(home.env_path)
    from habakkuk.engine.home import read_env_file

    memory = Memory(
        home, config, lambda: secret_variables(config, env, read_env_file(home.env_path))
    )
    samples = dict(SECRETS) | {f"env {k}": f"remember {v} please" for k, v in ENV_SECRETS.items()}
    try:
        await memory.save("main", "Existing", "A note to replace.", provenance=AGENT)
        await memory.save("main", "Long", "word " * 200, provenance=AGENT)
        writes: list[Callable[[str], Awaitable[object]]] = [
            lambda s: memory.save("main", "Note", s, provenance=AGENT),
            lambda s: memory.save("main", s[:150], "body", provenance=AGENT),
            lambda s: memory.save("main", "Tagged", "body", tags=[s[:40]], provenance=AGENT),
            lambda s: memory.save("main", "Remembered", s, provenance=USER, replace=False),
            lambda s: memory.replace("main", "existing", "Existing", s, provenance=USER),
            lambda s: memory.update_profile("main", "Facts", s, provenance=AGENT),
            lambda s: memory.update_profile("main", s[:60], "fact", provenance=AGENT),
            lambda s: memory.set_identity("main", "Wren", "", s, provenance=AGENT),
            lambda s: memory.save("main", "Long", s, provenance=REVIEW),
        ]
        for name, sample in samples.items():
            for number, write in enumerate(writes):
                refused = False
                try:
                    await write(sample)
                except SecretRefused as exc:
                    refused = True
                    assert sample not in str(exc)
                except ProposalCreated:
                    raise AssertionError(f"{name}: a secret became a proposal") from None
                # A title or tag cut short may no longer hold the whole secret; then it
                # must not hold a recognisable part either: check the bytes below.
                assert refused or number in (1, 2, 6), (name, number)
        await memory.close()
        stored = b""
        for path in sorted(home.agent_dir("main").rglob("*")):
            if path.is_file():
                stored += path.read_bytes()
        for name, sample in samples.items():
            for part in sample.split():
                if len(part) >= 12 and find_secret(part, ENV_SECRETS.values()):
                    assert part.encode() not in stored, name
            for value in ENV_SECRETS.values():
                assert value.encode() not in stored
        assert b"hunter2" not in stored and b"4111 1111" not in stored
    finally:
        await memory.close()


async def test_a_refused_secret_names_the_field_and_the_kind(memory: Memory) -> None:
    with pytest.raises(SecretRefused, match="memory: the content holds an OpenAI key"):
        await memory.save("main", "Key", SECRETS["openai"], provenance=AGENT)
    with pytest.raises(SecretRefused, match="identity: the manner holds a password"):
        await memory.set_identity(
            "main", "W", "", SECRETS["password assignment"], provenance=Provenance(by="agent")
        )
