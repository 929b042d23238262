"""`habakkuk memory ...`: output, the API's JSON shapes and exit codes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def memory_home(home: Home, write_config: WriteConfig) -> Home:
    ops = "  ops:\n    model: mock/scripted\ntimezone: UTC\n"
    write_config(mock_config("- text: hi", extra=ops))
    return home


def out_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["memory", *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_add_list_search_show_and_forget_a_note(
    memory_home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    add = ["memory", "add", "Coffee preference", "Flat", "white", "--tags", "food,drink"]
    assert main(add) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith("saved ")
    slug = said.split()[1]
    monkeypatch.setattr("sys.stdin", io.StringIO("Walk the dog at seven.\n"))
    assert main(["memory", "add", "Dog walks"]) == 0
    dog = capsys.readouterr().out.split()[1]

    listing = out_json(capsys, "list")
    assert listing["total"] == 2
    assert {m["slug"] for m in listing["memories"]} == {slug, dog}
    first = next(m for m in listing["memories"] if m["slug"] == slug)
    assert first["tags"] == ["food", "drink"] and first["source"] == "user"
    assert set(first) >= {"slug", "title", "tags", "created_at", "updated_at", "snippet"}

    found = out_json(capsys, "search", "dog")
    assert [m["slug"] for m in found["memories"]] == [dog]
    assert out_json(capsys, "search", "--tags", "drink")["total"] == 1
    assert main(["memory", "search", "zebra"]) == 1
    assert "no note of main matches" in capsys.readouterr().err

    assert main(["memory", "show", dog]) == 0
    shown = capsys.readouterr().out
    assert "Dog walks" in shown and "Walk the dog at seven." in shown
    assert out_json(capsys, "show", dog)["body"].strip() == "Walk the dog at seven."

    assert main(["memory", "forget", dog]) == 0
    assert capsys.readouterr().out == f"forgot {dog}\n"
    assert main(["memory", "show", dog]) == 2
    err = capsys.readouterr().err
    assert err.startswith("habakkuk: memory show: ") and len(err.strip().splitlines()) == 1
    assert out_json(capsys, "list", "--agent", "ops") == {"memories": [], "total": 0}


def test_history_shows_a_change_with_its_diff_and_restore_undoes_it(
    memory_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "add", "Plants", "Water the basil on Mondays."]) == 0
    slug = capsys.readouterr().out.split()[1]
    assert main(["memory", "add", "Plants", "Water it daily."]) == 0
    assert capsys.readouterr().out == f"replaced {slug}\n"

    history = out_json(capsys, "history", "--file", slug)
    assert [c["op"] for c in history["changes"]] == ["updated", "created"]
    assert history["pins"] == []
    change = history["changes"][0]
    assert main(["memory", "history", change["id"][:4]]) == 0
    shown = capsys.readouterr().out
    assert "-Water the basil on Mondays." in shown and "+Water it daily." in shown
    assert out_json(capsys, "history", change["id"])["diff"]

    assert main(["memory", "history", "--kind", "note", "--since", "7d"]) == 0
    assert change["id"] in capsys.readouterr().out
    restored = out_json(capsys, "restore", change["id"])
    assert restored["unchanged"] is False and restored["restored"]["restores"] == change["id"]
    assert out_json(capsys, "show", slug)["body"].strip() == "Water the basil on Mondays."
    assert main(["memory", "restore", change["id"], "--after"]) == 0
    assert capsys.readouterr().out.startswith(f"restored {slug} as change ")
    assert out_json(capsys, "show", slug)["body"].strip() == "Water it daily."

    stats = out_json(capsys, "reindex", "--full")
    assert stats["scanned"] == 1 and set(stats) == {"scanned", "updated", "removed", "seconds"}
    assert main(["memory", "reindex"]) == 0
    assert capsys.readouterr().out.startswith("scanned 1, updated 0, removed 0")


def test_bad_input_is_one_line_and_an_exit_code(
    memory_home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = [
        (["memory", "list", "--agent", "nobody"], 2, "agent 'nobody' is not configured"),
        (["memory", "show", "no-such-note"], 2, "memory show: "),
        (["memory", "history", "ffff"], 2, "memory history: "),
        (["memory", "history", "zz"], 1, "at least four characters"),
        (["memory", "trust", "no-such-note"], 2, "memory trust: "),
        (["memory", "search"], 2, "give words to find"),
        (["memory", "add", "Key", f"the key is {SECRET}"], 1, "habakkuk: "),
        (["memory", "history", "--since", "yesteryear"], 1, "habakkuk: "),
    ]
    for args, code, said in cases:
        assert main(args) == code, args
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, (args, err)
        assert "Traceback" not in err and SECRET not in err
    monkeypatch.setattr("sys.stdin", io.StringIO("   \n"))
    assert main(["memory", "add", "Empty"]) == 2
    assert "the content is empty" in capsys.readouterr().err
    assert main(["memory"]) == 2
    assert "give an action" in capsys.readouterr().err
    assert out_json(capsys, "list") == {"memories": [], "total": 0}  # nothing was saved


def test_no_secret_of_the_corpus_is_added_from_the_shell(
    memory_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.knowledge.secrets_corpus import SECRETS

    for name, secret in SECRETS.items():
        assert main(["memory", "add", f"About {name}", secret]) == 1, name
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (name, err)
        assert main(["memory", "add", "Tagged", "x", "--tags", secret.replace(",", " ")]) == 1
        capsys.readouterr()
    assert out_json(capsys, "list") == {"memories": [], "total": 0}


def test_the_cli_offers_the_kinds_the_history_knows() -> None:
    from habakkuk.cli import memory as memory_cli
    from habakkuk.knowledge.memory_views import CHANGE_KINDS

    assert memory_cli.KINDS == CHANGE_KINDS
