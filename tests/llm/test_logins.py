"""Subscription logins against fakes of OpenAI's and GitHub's real endpoints.

The device flows run through the CLI (`habakkuk auth login`), the token function
through the router (`habakkuk run`) to the fake model server, and the cross-process
refresh through two real processes sharing a home.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import AuthConfig, ChatGPTAuthConfig
from habakkuk.engine.home import Home
from habakkuk.engine.llm.logins.services import Logins
from habakkuk.engine.llm.provider import ProviderError
from tests.fakes.login_services import (
    ACCOUNT_ID,
    EMAIL,
    GITHUB_USER,
    FakeLoginServices,
    ThreadedLogins,
)
from tests.fakes.loopback import Threaded
from tests.fakes.model_server import FakeModelServer, Reply

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def logins() -> Iterator[FakeLoginServices]:
    with ThreadedLogins() as fake:
        yield fake


@pytest.fixture
def models() -> Iterator[FakeModelServer]:
    with Threaded(FakeModelServer()) as fake:
        yield fake


def login_config(logins: FakeLoginServices, models: FakeModelServer, model: str) -> str:
    """Both login providers, the auth endpoints at the fake, one agent on `model`."""
    return f"""
providers:
  chatgpt:
    base_url: {models.base_url}/v1
  copilot:
    preset: copilot
auth:
  chatgpt: {{base_url: "{logins.base_url}"}}
  copilot: {{base_url: "{logins.base_url}", api_url: "{logins.base_url}/api"}}
agents:
  main: {{model: {model}, mode: full}}
"""


def stored(home: Home) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home.root / "auth.json").read_text())
    return data


def store_chatgpt(home: Home, *, expires_in: float, refresh_token: str = "rt-0") -> None:
    """A ChatGPT login as `auth login` leaves it, its access token due in `expires_in` s."""
    record = {
        "access_token": "at-0",
        "refresh_token": refresh_token,
        "account_id": ACCOUNT_ID,
        "email": EMAIL,
        "expires_at": time.time() + expires_in,
    }
    path = home.root / "auth.json"
    path.write_text(json.dumps({"chatgpt": record}))
    path.chmod(0o600)


def test_chatgpt_device_login_then_a_turn_through_the_subscription_backend_costs_nothing(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(login_config(logins, models, "chatgpt/gpt-5"))
    assert main(["auth", "login", "chatgpt"]) == 0
    out = capsys.readouterr().out
    assert f"open {logins.base_url}/codex/device and enter the code ABCD-1234" in out
    assert f"Signed in to ChatGPT as {EMAIL}" in out
    polls = [r for r in logins.requests if r.path == "/api/accounts/deviceauth/token"]
    assert len(polls) == 2  # one "pending", then the code
    record = stored(home)["chatgpt"]
    assert (record["access_token"], record["refresh_token"]) == ("at-1", "rt-1")
    assert record["account_id"] == ACCOUNT_ID
    assert stat.S_IMODE(os.stat(home.root / "auth.json").st_mode) == 0o600

    models.script(Reply(text="Hello through ChatGPT.", input_tokens=1000, output_tokens=100))
    assert main(["run", "--json", "hi"]) == 0
    assert json.loads(capsys.readouterr().out)["reply"] == "Hello through ChatGPT."
    (call,) = models.requests
    assert call.path == "/v1/responses"
    assert call.api_key == "at-1"
    assert call.headers["chatgpt-account-id"] == ACCOUNT_ID
    assert call.json["store"] is False and call.json["stream"] is True
    assert call.json["instructions"]
    assert "max_output_tokens" not in call.json  # the backend refuses it

    assert main(["usage", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["model"] == "chatgpt/gpt-5" and row["calls"] == 1
    assert row["cost"] == 0.0 and row["unpriced_calls"] == 0


def test_copilot_device_login_then_a_turn_with_an_exchanged_copilot_token(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logins.copilot_api = f"{models.base_url}/v1"
    write_config(login_config(logins, models, "copilot/gpt-4.1"))
    assert main(["auth", "login", "copilot"]) == 0
    out = capsys.readouterr().out
    assert "open https://github.com/login/device and enter the code WXYZ-5678" in out
    assert f"Signed in to GitHub Copilot as {GITHUB_USER}" in out
    record = stored(home)["copilot"]
    assert record["github_token"] == "gho_fake_1"
    assert record["api_url"] == f"{models.base_url}/v1"

    models.script(Reply(text="Hello through Copilot.", input_tokens=500, output_tokens=50))
    assert main(["run", "--json", "hi"]) == 0
    assert json.loads(capsys.readouterr().out)["reply"] == "Hello through Copilot."
    (call,) = models.requests
    assert call.path == "/v1/chat/completions"
    assert call.api_key == record["copilot_token"]
    assert call.headers["editor-version"].startswith("vscode/")
    assert call.headers["copilot-integration-id"] == "vscode-chat"
    assert main(["usage", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["cost"] == 0.0


def test_an_expired_copilot_token_is_exchanged_again_before_the_call(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logins.copilot_api = f"{models.base_url}/v1"
    logins.github_tokens.add("gho_stored")
    write_config(login_config(logins, models, "copilot/gpt-4.1"))
    record = {
        "github_token": "gho_stored",
        "copilot_token": "old",
        "expires_at": time.time() + 60,  # under five minutes left
        "api_url": "http://127.0.0.1:9/none",
    }
    (home.root / "auth.json").write_text(json.dumps({"copilot": record}))
    models.script(Reply(text="ok"))
    assert main(["run", "--json", "hi"]) == 0
    assert len(logins.exchanges) == 1
    assert logins.exchanges[0].headers["Authorization"] == "token gho_stored"
    assert models.requests[0].api_key == stored(home)["copilot"]["copilot_token"] != "old"


def test_a_token_due_within_five_minutes_is_refreshed_and_written_back(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(login_config(logins, models, "chatgpt/gpt-5"))
    store_chatgpt(home, expires_in=120)
    models.script(Reply(text="fresh"))
    assert main(["run", "--json", "hi"]) == 0
    (refresh,) = logins.refreshes
    assert refresh.body["refresh_token"] == "rt-0" and not refresh.form
    record = stored(home)["chatgpt"]
    assert (record["access_token"], record["refresh_token"]) == ("at-1", "rt-1")
    assert record["expires_at"] > time.time() + 3000
    assert stat.S_IMODE(os.stat(home.root / "auth.json").st_mode) == 0o600
    assert models.requests[0].api_key == "at-1"


def test_a_token_with_time_left_is_used_without_a_refresh(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(login_config(logins, models, "chatgpt/gpt-5"))
    store_chatgpt(home, expires_in=3000)
    models.script(Reply(text="as is"))
    assert main(["run", "--json", "hi"]) == 0
    assert logins.refreshes == []
    assert models.requests[0].api_key == "at-0"


def test_a_refused_refresh_asks_for_a_new_login_in_one_line(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(login_config(logins, models, "chatgpt/gpt-5"))
    store_chatgpt(home, expires_in=-10, refresh_token="rt-revoked")
    assert main(["run", "hi"]) == 1
    err = capsys.readouterr().err
    assert "`habakkuk auth login chatgpt`" in err
    assert "auth" in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert models.requests == []
    assert stored(home)["chatgpt"]["refresh_token"] == "rt-revoked"  # nothing overwritten


async def test_an_unreachable_token_endpoint_is_a_network_error_and_a_refusal_an_auth_one(
    home: Home,
) -> None:
    store_chatgpt(home, expires_in=-10)
    settings = AuthConfig(chatgpt=ChatGPTAuthConfig(base_url="http://127.0.0.1:9"))
    with pytest.raises(ProviderError) as caught:
        await Logins(settings, home.root).login("chatgpt").token()
    assert caught.value.error_class == "network"  # the router retries it

    fake = FakeLoginServices(refused_refresh_tokens={"rt-0"})
    await fake.start()
    try:
        settings = AuthConfig(chatgpt=ChatGPTAuthConfig(base_url=fake.base_url))
        with pytest.raises(ProviderError) as caught:
            await Logins(settings, home.root).login("chatgpt").token()
    finally:
        await fake.close()
    assert caught.value.error_class == "auth"  # the router falls back down the chain
    assert "habakkuk auth login chatgpt" in str(caught.value)


async def test_parallel_calls_of_one_process_refresh_once(home: Home) -> None:
    store_chatgpt(home, expires_in=-10)
    fake = FakeLoginServices()
    await fake.start()
    try:
        settings = AuthConfig(chatgpt=ChatGPTAuthConfig(base_url=fake.base_url))
        login = Logins(settings, home.root).login("chatgpt")
        tokens = await asyncio.gather(*(login.token() for _ in range(8)))
    finally:
        await fake.close()
    assert tokens == ["at-1"] * 8
    assert len(fake.refreshes) == 1


def lock_waiters(lock: Path) -> int:
    """How many flock requests wait on `lock` (Linux /proc/locks marks them "->")."""
    try:
        inode = os.stat(lock).st_ino
    except FileNotFoundError:
        return 0
    waiting = 0
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[-3].endswith(f":{inode}"):
            waiting += 1
    return waiting


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
async def test_two_processes_refreshing_at_once_send_one_refresh(home: Home) -> None:
    store_chatgpt(home, expires_in=-10)
    lock = home.root / "auth.json.lock"
    fake = FakeLoginServices()

    async def hold() -> None:
        # Answer the first refresh only once the other process waits for the lock (or
        # has sent a refresh of its own: the test then fails, as it should).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if lock_waiters(lock) or len(fake.refreshes) > 1:
                return
            await asyncio.sleep(0.02)

    fake.refresh_hold = hold
    await fake.start()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        processes = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.llm.login_refresher",
                str(home.root),
                fake.base_url,
                cwd=REPO,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs = [await asyncio.wait_for(p.communicate(), 60) for p in processes]
    finally:
        await fake.close()
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
    assert [out.decode().strip() for out, _ in outputs] == ["at-1", "at-1"]
    assert len(fake.refreshes) == 1
    assert stored(home)["chatgpt"]["refresh_token"] == "rt-1"


def test_status_names_the_account_and_expiry_never_a_token_and_logout_forgets(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(login_config(logins, models, "chatgpt/gpt-5"))
    assert main(["auth", "status"]) == 0
    assert "chatgpt: not signed in (habakkuk auth login chatgpt)" in capsys.readouterr().out
    store_chatgpt(home, expires_in=3600)
    assert main(["auth", "status"]) == 0
    out = capsys.readouterr().out
    assert f"chatgpt: signed in as {EMAIL}, token valid until" in out
    assert str(home.root / "auth.json") in out
    assert "copilot: not signed in" in out
    assert "at-0" not in out and "rt-0" not in out
    assert main(["auth", "logout", "chatgpt"]) == 0
    assert "Signed out of chatgpt" in capsys.readouterr().out
    assert "chatgpt" not in stored(home)


@pytest.mark.parametrize(
    ("waits", "said"),
    [
        (["access_denied"], "the copilot sign-in was denied"),
        (["authorization_pending", "expired_token"], "the copilot sign-in code expired"),
    ],
)
def test_a_github_sign_in_that_ends_without_a_token_is_one_line(
    waits: list[str],
    said: str,
    logins: FakeLoginServices,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logins.github_waits = waits
    write_config(
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        f'auth:\n  copilot: {{base_url: "{logins.base_url}", api_url: "{logins.base_url}/api"}}\n'
    )
    assert main(["auth", "login", "copilot"]) == 1
    err = capsys.readouterr().err
    assert said in err
    assert len(err.strip().splitlines()) == 1
    assert not (home.root / "auth.json").exists()


def test_github_slow_down_and_pending_polls_keep_waiting_until_the_token(
    logins: FakeLoginServices,
    models: FakeModelServer,
    home: Home,
    write_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    logins.github_waits = ["authorization_pending", "slow_down", "authorization_pending"]
    write_config(login_config(logins, models, "copilot/gpt-4.1"))
    assert main(["auth", "login", "copilot"]) == 0
    polls = [r for r in logins.requests if r.path == "/login/oauth/access_token"]
    assert len(polls) == 4
    assert stored(home)["copilot"]["user"] == GITHUB_USER


async def test_an_auth_json_that_is_not_json_is_an_auth_error_naming_the_file(
    home: Home,
) -> None:
    (home.root / "auth.json").write_text("{not json")
    with pytest.raises(ProviderError) as caught:
        await Logins(AuthConfig(), home.root).login("chatgpt").token()
    assert caught.value.error_class == "auth"
    assert f"{home.root / 'auth.json'}: not valid JSON" in str(caught.value)


def test_an_auth_json_that_cannot_be_read_is_one_line_naming_it(
    home: Home, write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config("providers:\n  mock: {type: mock}\nagents:\n  main: {model: mock/x}\n")
    (home.root / "auth.json").mkdir()
    assert main(["auth", "status"]) == 1
    err = capsys.readouterr().err
    assert f"{home.root / 'auth.json'}: cannot read: Is a directory" in err
    assert "Traceback" not in err


def test_a_login_provider_of_the_wrong_type_or_with_a_key_is_a_config_error(
    write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        "providers:\n  sub: {type: anthropic, auth: chatgpt}\nagents:\n  main: {model: sub/x}\n"
    )
    assert main(["run", "hi"]) != 0
    assert "auth: chatgpt needs type: responses" in capsys.readouterr().err


def test_doctor_checks_a_login_provider_is_signed_in_not_its_key(
    home: Home, write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config("providers:\n  chatgpt: {}\nagents:\n  main: {model: chatgpt/gpt-5}\n")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  login chatgpt: not signed in to chatgpt: run `habakkuk auth login chatgpt`" in out
    assert "key chatgpt" not in out
    store_chatgpt(home, expires_in=3600)
    main(["doctor"])
    assert f"ok    login chatgpt: {EMAIL}" in capsys.readouterr().out


def test_an_unknown_key_under_auth_is_a_config_error_naming_it(
    write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        "auth:\n  chatgpt: {base_ulr: http://127.0.0.1:9}\n"
    )
    assert main(["auth", "login", "chatgpt"]) != 0
    err = capsys.readouterr().err
    assert "config.yaml:6: auth.chatgpt.base_ulr: unknown key" in err
