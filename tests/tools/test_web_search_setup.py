"""web_search's surroundings: the `search:` section, the core toolset, `habakkuk doctor`'s
line for the provider's key, and the searches in `/usage` and `habakkuk usage`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.services.doctor import run_checks
from habakkuk.tools.web_search.tool import WebSearch
from tests.conftest import WriteConfig, mock_config
from tests.fakes.loopback import Threaded
from tests.fakes.search_apis import KEY, FakeSearchApi, Hit

AGENT = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


def parse(text: str, tmp_path: Path) -> Config:
    return parse_config(AGENT + textwrap.dedent(text), tmp_path / "config.yaml", Home(tmp_path))


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("search: {provider: bing}",
         "config.yaml:6: search.provider: must be one of brave, tavily, exa, searxng, "
         "duckduckgo, not 'bing'"),
        ("search:\n  provider: searxng\n",
         "config.yaml:7: search.provider: searxng needs url: its instance's address, e.g. "
         "https://searx.example.org"),
        ("search:\n  provider: brave\n  url: https://searx.example.org\n",
         "config.yaml:8: search.url: only for provider searxng (base_url points brave "
         "elsewhere)"),
        ("search:\n  provider: searxng\n  url: https://s.example\n  base_url: https://x.example\n",
         "config.yaml:9: search.base_url: searxng takes the address of its instance as url"),
        ("search:\n  provider: tavily\n  base_url: ftp://files.example\n",
         "config.yaml:8: search.base_url: 'ftp://files.example' is not an http(s) URL"),
        ("search:\n  provider: searxng\n  url: searx.example.org\n",
         "config.yaml:8: search.url: 'searx.example.org' is not an http(s) URL"),
        ("search:\n  provider: duckduckgo\n  key_env: DDG_KEY\n",
         "config.yaml:8: search.key_env: duckduckgo takes no key"),
        ("search:\n  provider: exa\n  key_env: exa-key\n",
         "config.yaml:8: search.key_env: 'exa-key' must name a variable, e.g. BRAVE_API_KEY"),
        ("search:\n  provider: brave\n  keyenv: MY_KEY\n",
         "config.yaml:8: search.keyenv: unknown key (known keys: base_url, key_env, provider, "
         "url)"),
        ("search:\n  key_env: MY_KEY\n", "config.yaml:7: search.provider: is required"),
    ],
)  # fmt: skip
def test_each_mistake_in_the_section_is_one_line_naming_file_line_and_key(
    tmp_path: Path, section: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(section, tmp_path)
    assert str(caught.value) == f"{tmp_path / 'config.yaml'}:{message.split(':', 1)[1]}"


def test_each_keyed_provider_has_its_default_variable(tmp_path: Path) -> None:
    for provider, variable in (
        ("brave", "BRAVE_API_KEY"),
        ("tavily", "TAVILY_API_KEY"),
        ("exa", "EXA_API_KEY"),
    ):
        search = parse(f"search: {{provider: {provider}}}\n", tmp_path).search
        assert search is not None and search.key_var == variable
    mine = parse("search: {provider: brave, key_env: MY_BRAVE}\n", tmp_path).search
    assert mine is not None and mine.key_var == "MY_BRAVE"
    keyless = parse("search: {provider: searxng, url: 'https://s.example'}\n", tmp_path).search
    assert keyless is not None and keyless.key_var is None
    assert parse("", tmp_path).search is None


async def test_web_search_is_in_core_with_or_without_a_section(runtime_factory: Any) -> None:
    plain = await runtime_factory(mock_config())
    tool = plain.tools.get("web_search")
    assert isinstance(tool, WebSearch) and tool.provider.name == "duckduckgo"
    assert tool in plain.tools.tools_for(["core"])
    configured = await runtime_factory(
        mock_config(extra="search:\n  provider: exa\n  base_url: http://127.0.0.1:9/\n")
    )
    tool = configured.tools.get("web_search")
    assert isinstance(tool, WebSearch) and tool.provider.name == "exa"
    assert tool.provider.key_env == "EXA_API_KEY"


def search_lines(checks: list[Any]) -> list[str]:
    return [c.line() for c in checks if c.name.startswith("search")]


async def test_doctor_checks_the_providers_key_without_searching(
    home: Home, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    write_config(mock_config(extra="search: {provider: brave}\n"))
    assert search_lines(await run_checks(home)) == [
        "FAIL  search brave: BRAVE_API_KEY is not set (environment or .env)"
    ]
    home.env_path.write_text("BRAVE_API_KEY=abc\n", encoding="utf-8")
    home.env_path.chmod(0o600)
    assert search_lines(await run_checks(home)) == ["ok    search brave: BRAVE_API_KEY set"]
    write_config(mock_config(extra="search: {provider: searxng, url: 'https://s.example'}\n"))
    assert search_lines(await run_checks(home)) == [
        "ok    search searxng: no key needed (https://s.example)"
    ]
    write_config(mock_config())
    assert search_lines(await run_checks(home)) == [
        "ok    search: DuckDuckGo's page (no search: section), best effort"
    ]


SEARCHING = """
providers:
  mock:
    type: mock
    script:
      - steps:
          - tool_calls: [{{name: web_search, arguments: {{query: "python 3.14"}}}}]
          - "Python 3.14 is out."
agents:
  main:
    model: mock/x
    mode: full
search:
  provider: brave
  base_url: {url}
"""


def test_a_search_shows_in_usage_as_its_own_line(
    home: Home,
    write_config: WriteConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", KEY)
    with Threaded(FakeSearchApi("brave")) as fake:
        fake.hits = [Hit("What's new", "https://docs.python.org/3/whatsnew/3.14.html", "New")]
        write_config(SEARCHING.format(url=fake.base_url))
        assert main(["run", "--json", "what's new in python 3.14?"]) == 0
        body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert body["reply"] == "Python 3.14 is out." and len(fake.requests) == 1
    assert main(["run", "--session", body["session"], "/usage"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "brave/web_search [search]: 1 call(s), 0 in (0 cached), 0 out, cost unknown" in lines
    assert any(line.startswith("mock/x: 2 call(s)") for line in lines)
    assert main(["usage"]) == 0
    assert "brave/web_search [search]" in capsys.readouterr().out
