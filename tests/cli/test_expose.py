"""`habakkuk expose tailscale|status|off` against a fake `tailscale` executable first on
PATH: it records its arguments and answers as the real CLI does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig

FAKE = """\
#!{python}
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps(args) + "\\n")
if args[:3] == ["serve", "status", "--json"]:
    print(open({status!r}, encoding="utf-8").read())
elif "--bg" in args:
    port = [a for a in args if a.startswith("--https=")][0].split("=")[1]
    print("Available within your tailnet:\\n")
    print(f"https://box.tail1234.ts.net:{{port}}/")
    print(f"|-- proxy {{args[-1]}}\\n")
    print("Serve started and running in the background.")
elif "funnel" in args:
    sys.exit(3)
"""
CONFIG = """\
providers:
  mock: {type: mock}
agents:
  main: {model: mock/scripted}
http:
  listen: 127.0.0.1:8611
"""


class Tailscale:
    """The fake's record of its runs, and the status it answers."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / "calls.jsonl"
        self.status = folder / "status.json"
        self.status.write_text("{}", encoding="utf-8")

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def tailscale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tailscale:
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = Tailscale(folder)
    program = folder / "tailscale"
    program.write_text(
        FAKE.format(python=sys.executable, log=str(fake.log), status=str(fake.status)),
        encoding="utf-8",
    )
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return fake


def test_tailscale_serves_the_listener_to_the_tailnet(
    home: Home, write_config: WriteConfig, tailscale: Tailscale, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(CONFIG + "  token_env: API_TOKEN\n")
    assert main(["expose", "tailscale"]) == 0
    assert tailscale.calls() == [["serve", "--bg", "--https=443", "http://127.0.0.1:8611"]]
    out = capsys.readouterr().out
    assert "https://box.tail1234.ts.net:443/" in out and "never funnel" in out
    assert main(["expose", "tailscale", "--port", "8443"]) == 0
    assert tailscale.calls()[-1] == ["serve", "--bg", "--https=8443", "http://127.0.0.1:8611"]
    assert not any("funnel" in call for call in tailscale.calls())


def test_print_shows_the_command_without_running_it(
    home: Home, write_config: WriteConfig, tailscale: Tailscale, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(CONFIG.replace("127.0.0.1:8611", "0.0.0.0:9000") + "  token_env: API_TOKEN\n")
    assert main(["expose", "tailscale", "--print", "--port", "10000"]) == 0
    out = capsys.readouterr().out
    assert out == "tailscale serve --bg --https=10000 http://127.0.0.1:9000\n"
    assert tailscale.calls() == []


def test_refused_without_a_token_or_an_http_section(
    home: Home, write_config: WriteConfig, tailscale: Tailscale, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(CONFIG)
    assert main(["expose", "tailscale"]) == 2
    err = capsys.readouterr().err
    assert "http.token_env is not set" in err and err.count("\n") == 1
    write_config(CONFIG.split("http:")[0])
    assert main(["expose", "tailscale", "--print"]) == 2
    assert "no http: section" in capsys.readouterr().err
    assert tailscale.calls() == []


def test_status_lists_what_is_shared_and_warns_when_funnel_is_on(
    home: Home, tailscale: Tailscale, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["expose", "status"]) == 0
    assert "Nothing is shared" in capsys.readouterr().out
    tailscale.status.write_text(
        json.dumps(
            {
                "TCP": {"443": {"HTTPS": True}},
                "Web": {
                    "box.tail1234.ts.net:443": {
                        "Handlers": {"/": {"Proxy": "http://127.0.0.1:8611"}}
                    }
                },
                "AllowFunnel": {"box.tail1234.ts.net:443": True},
            }
        ),
        encoding="utf-8",
    )
    assert main(["expose", "status"]) == 0
    captured = capsys.readouterr()
    assert "https://box.tail1234.ts.net:443/ -> http://127.0.0.1:8611" in captured.out
    assert "Funnel is on for box.tail1234.ts.net:443" in captured.err
    assert tailscale.calls()[-1] == ["serve", "status", "--json"]


def test_off_stops_sharing_the_port(
    home: Home, tailscale: Tailscale, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["expose", "off", "--port", "8443"]) == 0
    assert tailscale.calls() == [["serve", "--https=8443", "off"]]
    assert "Stopped sharing HTTPS port 8443" in capsys.readouterr().out


def test_a_missing_tailscale_is_one_line(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["expose", "status"]) == 2
    assert "tailscale is not installed" in capsys.readouterr().err
