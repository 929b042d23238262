"""Shared fixtures: a temporary home with a config, and a runtime opened on it."""

from __future__ import annotations

import os
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import mcp.client.stdio  # noqa: F401  (see below)
import pytest
from pluggy import Result

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.engine.redact import REDACTOR
from habakkuk.runtime import Runtime
from tests.channels.fake_discord import BOT_TOKEN as DISCORD_TOKEN
from tests.channels.fake_discord import DiscordDriver, FakeDiscord
from tests.channels.fake_matrix import BOT_TOKEN as MATRIX_TOKEN
from tests.channels.fake_matrix import FakeMatrix, MatrixDriver
from tests.channels.fake_signal import FakeSignal, SignalDriver
from tests.channels.fake_slack import FakeSlack, SlackDriver
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram
from tests.fakes.github_api import FakeGitHub, ThreadedGitHub
from tests.fakes.model_server import FakeModelServer
from tests.processes import StartServe, serve_processes

if TYPE_CHECKING:  # imported when used: neonize loads its Go library (0.7 s)
    from tests.channels.fake_whatsapp import FakeWhatsApp, WhatsAppDriver

# The mcp SDK's stdio client takes `errlog=sys.stderr` as a default argument, bound when
# mcp.client.stdio is first imported. Imported first inside a test that captures with
# capsys, every later stdio client would write the server's stderr to that test's
# closed capture (no fileno). So it is imported here, with the session's own stderr.

# Under pytest-xdist, syrupy's unused-snapshot check is done for the whole run.
pytest_plugins = ["tests.snapshot_workers", "tests.pg_fixtures", "tests.channels.mail_fixtures"]

# Tests must never reach a real provider or read the developer's home.
for _var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "HABAKKUK_HOME"):
    os.environ.pop(_var, None)
# Habakkuk's own words are English in the tests whatever the developer's locale (the CLI
# speaks LC_ALL/LC_MESSAGES/LANG); a test of another language sets its own.
for _var in ("LC_ALL", "LC_MESSAGES"):
    os.environ.pop(_var, None)
os.environ["LANG"] = "C.UTF-8"
# Never touch a desktop keyring from tests (and skip its slow import).
os.environ["HABAKKUK_NO_KEYRING"] = "1"


def _memory_temproot() -> str | None:
    """/dev/shm when it is a memory file system with room for the run's homes, else None.

    Every home a test makes holds SQLite databases in WAL mode, whose commits, checkpoints
    and schema creation fsync: on a disk that is most of a runtime's open and close (about
    250 ms of each test that opens one, against 20 ms in memory). A killed process loses
    nothing the page cache holds either way, so the crash tests prove the same in memory.
    A machine with a small /dev/shm (a container's 64 MB) keeps the default."""
    root = "/dev/shm"
    try:
        stat = os.statvfs(root)
    except OSError:
        return None
    room = stat.f_bavail * stat.f_frsize
    return root if room >= 2 * 1024**3 and os.access(root, os.W_OK | os.X_OK) else None


# tmp_path and tmp_path_factory make their folders under PYTEST_DEBUG_TEMPROOT (pytest's
# documented variable); set here, before any is made, it holds for every xdist worker.
if "PYTEST_DEBUG_TEMPROOT" not in os.environ and (_temproot := _memory_temproot()):
    os.environ["PYTEST_DEBUG_TEMPROOT"] = _temproot

MOCK_CONFIG = """
providers:
  mock:
    type: mock
agents:
  main:
    model: mock/scripted
    mode: full
"""


@pytest.fixture(autouse=True)
def no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output, colours and snapshots must not depend on the developer's terminal."""
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(autouse=True)
def redactor_values_restored() -> Iterator[None]:
    """The process's redactor learns a home's secrets as a test's runtime reads them; each
    test leaves it as it found it, so no test's secret hides words of the next one."""
    before = REDACTOR.values
    yield
    REDACTOR.use_values(before)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    """An empty, prepared home; $HABAKKUK_HOME points at it."""
    root = tmp_path / "home"
    monkeypatch.setenv("HABAKKUK_HOME", str(root))
    result = Home(root)
    result.prepare()
    return result


WriteConfig = Callable[[str], Path]


@pytest.fixture
def write_config(home: Home) -> WriteConfig:
    """Write config.yaml into the test home (text is dedented)."""

    def _write(text: str) -> Path:
        home.config_path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return home.config_path

    return _write


def mock_config(script_yaml: str = "", *, mode: str = "full", extra: str = "") -> str:
    """A config with one mock provider (optionally scripted) and one agent `main`."""
    script = ""
    if script_yaml:
        script = "    script:\n" + textwrap.indent(textwrap.dedent(script_yaml).strip(), "      ")
    return (
        "providers:\n  mock:\n    type: mock\n"
        + (script + "\n" if script else "")
        + f"agents:\n  main:\n    model: mock/scripted\n    mode: {mode}\n"
        + textwrap.dedent(extra)
    )


# Each remote adapter type the fake model server speaks: its provider lines (base_url
# under the server's address) and a model of that type.
REMOTE_PROVIDERS = {
    "anthropic": ("type: anthropic\n    base_url: {url}", "claude-haiku-4-5"),
    "openai": ("type: openai\n    base_url: {url}/v1", "gpt-5-mini"),
    "responses": ("type: responses\n    base_url: {url}/v1", "gpt-5"),
    "litellm": ("type: litellm\n    base_url: {url}/v1", "openai/gpt-fake"),
    "gemini": ("type: gemini\n    base_url: {url}", "gemini-3-flash-preview"),
}


def remote_config(kind: str, url: str, *, extra: str = "") -> str:
    """A config with one provider `remote` of adapter type `kind` at `url` (a fake model
    server) and one agent `main` on its model (REMOTE_PROVIDERS)."""
    provider, model = REMOTE_PROVIDERS[kind]
    return (
        "providers:\n"
        f"  remote:\n    {provider.format(url=url)}\n    key_env: REMOTE_KEY\n"
        f"agents:\n  main:\n    model: remote/{model}\n    mode: full\n" + extra
    )


OpenRuntime = Callable[[str], Awaitable[Runtime]]


@pytest.fixture
async def runtime_factory(home: Home) -> AsyncIterator[OpenRuntime]:
    """Open runtimes on the test home from config text; all are closed afterwards."""
    opened: list[Runtime] = []

    async def _open(config_text: str) -> Runtime:
        home.config_path.write_text(config_text, encoding="utf-8")
        config = parse_config(config_text, home.config_path, home)
        runtime = await Runtime.open(home, config)
        opened.append(runtime)
        return runtime

    yield _open
    for runtime in opened:
        await runtime.close()


# -- the fake servers: each started in one place -----------------------------------------


@pytest.fixture
async def model_server() -> AsyncIterator[FakeModelServer]:
    """The fake model server (the OpenAI and Anthropic wires) on a loopback port."""
    async with FakeModelServer() as server:
        yield server


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    """The fake Telegram Bot API on a loopback port; $TG_TOKEN is its bot's token."""
    monkeypatch.setenv("TG_TOKEN", BOT_TOKEN)
    async with FakeTelegram(token=BOT_TOKEN) as server:
        yield server


def load_neonize() -> None:
    """Import neonize without its import's leak: it reads `uname -a` through an os.popen
    it never closes, a ResourceWarning (filterwarnings=error) that would surface in
    whichever test next starts a subprocess. Here that one read goes through a popen
    that finishes and closes before it returns."""
    import io
    import subprocess
    from unittest import mock

    def finished_popen(cmd: str, mode: str = "r", buffering: int = -1) -> io.StringIO:
        done = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=False)
        return io.StringIO(done.stdout)

    with mock.patch("os.popen", finished_popen):
        import neonize  # noqa: F401


def pytest_sessionstart(session: pytest.Session) -> None:
    """Load neonize quietly (load_neonize) before any test: besides the WhatsApp tests,
    whatever lists the chat platforms (setup, the one-table test) imports it."""
    load_neonize()


@pytest.fixture
def wa(monkeypatch: pytest.MonkeyPatch) -> FakeWhatsApp:
    """WhatsApp at the library's event boundary (tests/channels/fake_whatsapp.py): the
    adapter's clients are in-memory ones producing neonize's own protobuf events."""
    load_neonize()
    from tests.channels.fake_whatsapp import FakeWhatsApp

    network = FakeWhatsApp()
    network.install(monkeypatch)
    return network


@pytest.fixture
def wa_driver(wa: FakeWhatsApp) -> WhatsAppDriver:
    """The PlatformDriver of the fake WhatsApp (the cross-platform table's row)."""
    from tests.channels.fake_whatsapp import WhatsAppDriver

    return WhatsAppDriver(wa)


@pytest.fixture
async def slack(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSlack]:
    """The fake Slack (Web API and Socket Mode) on a loopback port; $SLACK_APP_TOKEN and
    $SLACK_BOT_TOKEN are its app's tokens."""
    async with FakeSlack() as server:
        monkeypatch.setenv("SLACK_APP_TOKEN", server.app_token)
        monkeypatch.setenv("SLACK_BOT_TOKEN", server.bot_token)
        yield server


@pytest.fixture
async def signal_cli() -> AsyncIterator[FakeSignal]:
    """The fake signal-cli HTTP daemon on a loopback port (keepalives every second)."""
    async with FakeSignal(keepalive=1.0) as server:
        yield server


@pytest.fixture
def slack_driver(slack: FakeSlack) -> SlackDriver:
    """The allowed person in a DM with the bot on the fake Slack (a PlatformDriver)."""
    return SlackDriver(slack)


@pytest.fixture
def signal_driver(signal_cli: FakeSignal) -> SignalDriver:
    """Alice on the fake signal-cli daemon (tests/channels/platform_driver.py)."""
    return SignalDriver(signal_cli)


@pytest.fixture
async def hs(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeMatrix]:
    """The fake Matrix homeserver on a loopback port; $MATRIX_TOKEN is its bot's token."""
    monkeypatch.setenv("MATRIX_TOKEN", MATRIX_TOKEN)
    async with FakeMatrix(token=MATRIX_TOKEN) as server:
        yield server


@pytest.fixture
async def matrix_driver(hs: FakeMatrix) -> MatrixDriver:
    """The PlatformDriver of the fake homeserver (alice in a private room with the bot)."""
    return MatrixDriver(hs)


@pytest.fixture
async def dc(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The fake Discord (Gateway and REST) on a loopback port; $DISCORD_TOKEN is its bot's."""
    monkeypatch.setenv("DISCORD_TOKEN", DISCORD_TOKEN)
    async with FakeDiscord(token=DISCORD_TOKEN) as server:
        yield server


@pytest.fixture
def discord_driver(dc: FakeDiscord) -> DiscordDriver:
    """The allowed person in a DM with the bot on the fake Discord (a PlatformDriver)."""
    return DiscordDriver(dc)


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """The fake GitHub API, in a thread of its own (the CLI runs its own loop); skills
    installs go to it ($HABAKKUK_GITHUB_API), with no token of the developer's."""
    with ThreadedGitHub() as server:
        monkeypatch.setenv("HABAKKUK_GITHUB_API", server.base_url)
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        yield server


@pytest.fixture
async def serve_process() -> AsyncIterator[StartServe]:
    """`await serve_process(home, **env)`: a real `habakkuk --serve` on `home`, to kill or
    stop (tests/processes.py); any a test leaves running is killed after it."""
    async with serve_processes() as start:
        yield start


# -- no silent skips in CI ---------------------------------------------------------------
# Tests that drive chromium, ripgrep, tmux or git skip (with their reason, shown by -rs)
# where the tool is missing. Under CI=true a skip is a failure: .ci/run installs them all.
CI_SKIP_HINT = "skipped under CI=true; .ci/run installs git, tmux, ripgrep and chromium"


def _fail_skip_in_ci(report: pytest.CollectReport | pytest.TestReport) -> None:
    keywords = getattr(report, "keywords", {})
    if "optional_extra" in keywords:
        return  # needs an optional extra (litellm) that the test extra does not install
    if "host_daemon" in keywords:
        return  # needs a Docker daemon: no machine CI runs on has one (a fake docker CLI
        # covers what we send it); where one runs, the test runs and can fail
    if os.environ.get("CI", "").lower() in ("true", "1") and report.skipped:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{CI_SKIP_HINT}: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    _fail_skip_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, Result[pytest.CollectReport], None]:
    outcome = yield
    _fail_skip_in_ci(outcome.get_result())
