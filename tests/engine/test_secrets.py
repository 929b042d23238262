"""Secret managers: each source (fakes of `op` and `bw` on PATH that check their
arguments, a command, a file, a keyring backend set in the test), the cache period, the
failure log that holds no value, the lookup order, and the config's checks."""

from __future__ import annotations

import asyncio
import logging
import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from keyring.backend import KeyringBackend

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.redact import MARK, redact
from habakkuk.engine.secrets import SecretError, SecretStore, read_source
from habakkuk.engine.secrets_config import SecretsConfig, SecretSourceConfig, resolve_secrets
from tests.conftest import mock_config

OP_VALUE = "sk-ant-from-1password-0123456789"
BW_PASSWORD = "bw-password-value-0123"
BW_TOKEN = "bw-custom-field-value-0123"
STDOUT_SECRET = "leaked-on-stdout-0123456789"


def script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`op` and `bw` fakes first on PATH; each refuses arguments it does not expect."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script(
        folder,
        "op",
        f"""\
        if [ "$1" = read ] && [ "$2" = "op://Private/Anthropic/credential" ] && [ $# = 2 ]; then
          printf '%s\\n' '{OP_VALUE}'; exit 0
        fi
        echo "[ERROR] unexpected arguments: $*" >&2; exit 1
        """,
    )
    script(
        folder,
        "bw",
        f"""\
        if [ "$1 $2 $3" = "get password GitHub" ] && [ $# = 3 ]; then
          printf '%s' '{BW_PASSWORD}'; exit 0
        fi
        if [ "$1 $2 $3" = "get item GitHub" ] && [ $# = 3 ]; then
          printf '%s' '{{"login": {{"username": "me", "password": "{BW_PASSWORD}"}},
            "fields": [{{"name": "token", "value": "{BW_TOKEN}"}}]}}'; exit 0
        fi
        echo "Not found." >&2; exit 1
        """,
    )
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def store_of(text: str, home: Home) -> SecretStore:
    config = parse_config(mock_config(extra=textwrap.dedent(text)), home.config_path, home)
    return SecretStore(config.secrets)


def test_1password_reads_the_reference_with_op_read(fake_bin: Path, home: Home) -> None:
    store = store_of(
        """\
        secrets:
          sources: {op: {type: 1password}}
          refs:
            A_KEY: "op:op://Private/Anthropic/credential"
            B_KEY: "op://Private/Anthropic/credential"
        """,
        home,
    )
    assert store.value("A_KEY") == OP_VALUE  # the trailing newline is not part of it
    assert store.value("B_KEY") == OP_VALUE  # op:// goes to the 1password source


def test_bitwarden_reads_a_password_or_a_field_of_the_item(fake_bin: Path, home: Home) -> None:
    store = store_of(
        """\
        secrets:
          sources: {bw: {type: bitwarden}}
          refs: {PASS: "bw:GitHub", TOKEN: "bw:GitHub#token", USER: "bw:GitHub#username"}
        """,
        home,
    )
    assert store.value("PASS") == BW_PASSWORD
    assert store.value("TOKEN") == BW_TOKEN
    assert store.value("USER") == "me"


def test_a_command_gets_the_reference_in_habakkuk_secret_ref(home: Home) -> None:
    store = store_of(
        """\
        secrets:
          sources: {vault: {type: command, command: "printf 'v-%s' \\"$HABAKKUK_SECRET_REF\\""}}
          refs: {K: "vault:prod/db"}
        """,
        home,
    )
    assert store.value("K") == "v-prod/db"


def test_a_file_must_be_private(
    home: Home, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "keys"
    folder.mkdir()
    (folder / "good").write_text("file-secret-value\n", encoding="utf-8")
    (folder / "good").chmod(0o600)
    (folder / "open").write_text("open-secret-value\n", encoding="utf-8")
    (folder / "open").chmod(0o644)
    store = store_of(
        f"""\
        secrets:
          sources: {{files: {{type: file, dir: {folder}}}}}
          refs: {{GOOD: "files:good", OPEN: "files:open"}}
        """,
        home,
    )
    assert store.value("GOOD") == "file-secret-value"
    assert store.value("OPEN") is None
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "OPEN" in said and "chmod 600" in said and "open-secret-value" not in said


class MemoryKeyring(KeyringBackend):
    """A keyring backend in memory, set programmatically for the test."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # reason: untyped in keyring
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.entries.pop((service, username), None)


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


def test_the_keyring_source_reads_service_and_reference(
    memory_keyring: MemoryKeyring, home: Home
) -> None:
    memory_keyring.set_password("work", "slack-bot", "xoxb-from-the-keyring")
    store = store_of(
        """\
        secrets:
          sources: {kr: {type: keyring, service: work}}
          refs: {SLACK_TOKEN: "kr:slack-bot", MISSING: "kr:nothing"}
        """,
        home,
    )
    assert store.value("SLACK_TOKEN") == "xoxb-from-the-keyring"
    assert store.value("MISSING") is None


def test_a_value_is_kept_for_the_cache_period_then_read_again() -> None:
    calls: list[str] = []
    now = [0.0]

    def reader(source: SecretSourceConfig, reference: str) -> str:
        calls.append(reference)
        return f"value-{len(calls)}"

    source = SecretSourceConfig(type="command", command="true")
    config = SecretsConfig(sources={"c": source}, refs={"K": "c:ref"})
    resolve_secrets(config, Path("config.yaml"), Path("/"))
    config.sources["c"].cache_seconds = 120.0
    store = SecretStore(config, clock=lambda: now[0], reader=reader)
    assert store.value("K") == "value-1"
    now[0] = 119.0
    assert store.value("K") == "value-1" and calls == ["ref"]
    now[0] = 121.0
    assert store.value("K") == "value-2" and calls == ["ref", "ref"]


def test_a_failing_source_is_logged_with_the_variable_and_stderr_never_the_value(
    home: Home, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    store = store_of(
        f"""\
        secrets:
          sources:
            bad: {{type: command, command: "echo {STDOUT_SECRET}; echo vault sealed >&2; exit 3"}}
          refs: {{DB_PASSWORD: "bad:x"}}
        """,
        home,
    )
    assert store.value("DB_PASSWORD") is None
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "DB_PASSWORD" in said and "bad" in said and "vault sealed" in said
    assert STDOUT_SECRET not in said
    # Left alone for 30 seconds: asking again does not run the command again.
    caplog.clear()
    assert store.value("DB_PASSWORD") is None
    assert not caplog.records


def test_the_environment_wins_then_the_reference_then_dotenv(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.env_path.write_text("IN_ALL=from-dotenv\nREF_FAILS=dotenv-kept\nONLY_FILE=f\n")
    config = parse_config(
        mock_config(
            extra=textwrap.dedent(
                """\
                secrets:
                  sources:
                    ok: {type: command, command: "printf from-ref"}
                    broken: {type: command, command: "exit 1"}
                  refs: {IN_ALL: "ok:x", REF_ONLY: "ok:y", REF_FAILS: "broken:z"}
                """
            )
        ),
        home.config_path,
        home,
    )
    env = Environment(home.env_path)
    ProviderHub(config, env, home.root)  # the hub attaches the references to the env
    assert env.get("IN_ALL") == "from-ref"  # the reference before .env
    monkeypatch.setenv("IN_ALL", "from-process")
    assert env.get("IN_ALL") == "from-process"  # the process environment first
    assert env.get("REF_ONLY") == "from-ref"
    assert env.get("REF_FAILS") == "dotenv-kept"  # a failing source falls back to .env
    assert env.get("ONLY_FILE") == "f"


async def test_on_the_event_loop_a_value_is_read_in_a_thread(home: Home) -> None:
    store = store_of(
        """\
        secrets:
          sources: {ok: {type: command, command: "printf late"}}
          refs: {K: "ok:x"}
        """,
        home,
    )
    assert store.value("K") is None  # never blocks the loop: read in the background
    deadline = time.monotonic() + 10
    while store.value("K") is None:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert store.value("K") == "late"
    assert await store.avalue("K") == "late"


def test_prefetch_fills_the_cache(home: Home) -> None:
    store = store_of(
        """\
        secrets:
          sources: {ok: {type: command, command: "printf early"}}
          refs: {K: "ok:x"}
        """,
        home,
    )
    store.prefetch()
    assert store.value("K") == "early"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('refs: {K: "nowhere:x"}', "secrets.refs.K: source 'nowhere' is not defined"),
        ('refs: {K: "op://v/i/f"}', "secrets.refs.K: an op:// reference needs a 1password"),
        ('refs: {K: "plain"}', "secrets.refs.K: must be SOURCE:REFERENCE"),
        ("sources: {c: {type: command}}", "secrets.sources.c.command: a command source needs"),
        ("sources: {c: {type: vault}}", "secrets.sources.c.type: must be one of"),
        ("sources: {c: {type: file, colour: red}}", "colour"),
        ("sources: {c: {type: keyring, cache: soon}}", "secrets.sources.c.cache"),
        ("sources: {c: {type: keyring, dir: /tmp}}", "secrets.sources.c.dir: only for type: file"),
    ],
)
def test_the_secrets_section_is_checked(home: Home, section: str, message: str) -> None:
    text = mock_config(extra=f"secrets:\n  {section}\n")
    with pytest.raises(ConfigError) as raised:
        parse_config(text, home.config_path, home)
    assert message in str(raised.value)
    assert "config.yaml:" in str(raised.value)


def test_a_missing_program_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no op here
    source = SecretSourceConfig(type="1password")
    with pytest.raises(SecretError, match="op is not installed"):
        read_source(source, "op://a/b/c")


async def test_doctor_reads_each_reference_and_finds_keys_kept_in_a_manager(home: Home) -> None:
    from habakkuk.services.doctor import run_checks

    text = (
        "providers:\n  anthropic:\n    type: anthropic\n    key_env: VAULT_KEY\n"
        "agents:\n  main:\n    model: anthropic/claude-haiku-4-5\n"
        "secrets:\n"
        "  sources:\n"
        "    ok: {type: command, command: 'printf sk-ant-from-the-vault-0123456789'}\n"
        f"    bad: {{type: command, command: 'echo {STDOUT_SECRET}; echo sealed >&2; exit 2'}}\n"
        "  refs: {VAULT_KEY: 'ok:a', OTHER: 'bad:b'}\n"
    )
    home.config_path.write_text(text, encoding="utf-8")
    lines = [check.line() for check in await run_checks(home)]
    assert any(line.startswith("ok") and "secret VAULT_KEY" in line for line in lines)
    (bad,) = [line for line in lines if "secret OTHER" in line]
    assert bad.startswith("FAIL") and "sealed" in bad and STDOUT_SECRET not in bad
    assert not any("VAULT_KEY" in line and line.startswith("FAIL") for line in lines)


async def test_a_runtime_reads_its_references_before_the_first_turn(runtime_factory: Any) -> None:
    extra = (
        "secrets:\n"
        "  sources: {vault: {type: command, command: 'printf from-the-vault'}}\n"
        "  refs: {SOME_TOKEN: 'vault:x'}\n"
    )
    runtime = await runtime_factory(mock_config(extra=extra))
    # Prefetched off the loop when the runtime opened: on the loop it answers at once.
    assert runtime.env.get("SOME_TOKEN") == "from-the-vault"


def test_a_rotated_value_is_redacted_from_the_read_that_learns_it() -> None:
    values = iter(["first-secret-value-0001", "rotated-secret-value-0002"])
    now = [0.0]
    source = SecretSourceConfig(type="command", command="true")
    config = SecretsConfig(sources={"c": source}, refs={"K": "c:ref"})
    resolve_secrets(config, Path("config.yaml"), Path("/"))
    config.sources["c"].cache_seconds = 60.0
    store = SecretStore(config, clock=lambda: now[0], reader=lambda _source, _ref: next(values))
    assert store.value("K") == "first-secret-value-0001"
    now[0] = 61.0  # past the cache period: the manager now holds a rotated key
    assert store.value("K") == "rotated-secret-value-0002"
    said = redact("sent rotated-secret-value-0002 and first-secret-value-0001")
    assert said == f"sent {MARK} and {MARK}"
