"""The skills' HTTP API (spec 001 "Skills") against the real runtime and skills service.

Shared skills are made as a user makes them (a folder under HOME/skills); an installed
one also gets its lock entry (skills/.lock.json, as `habakkuk skills install` writes);
the agent's own under agents/main/skills (skill_save needs the scan, another slice).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from yarl import URL

from habakkuk.knowledge.hub.lock import read_lock
from tests.conftest import mock_config
from tests.knowledge.skills.conftest import DANGEROUS_FINDINGS, install, write_skill
from tests.server.conftest import Served, ServeFactory

TWO_AGENTS = "  ops:\n    model: mock/scripted\n    mode: full\ntimezone: UTC\n"
LISTED = {
    "name", "description", "shared", "scope", "source", "trusted", "verdict", "last_used",
    "updated", "pinned", "plugin", "warning", "reasons", "findings",
    "needs_acknowledgement",
}  # fmt: skip


def make_skill(
    root: Path, name: str, description: str, body: str, files: dict[str, str] | None = None
) -> Path:
    """A skill folder as a user writes one: SKILL.md and its supporting files."""
    folder = write_skill(root, name, description, body)
    for path, text in (files or {}).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    return folder


async def request(served: Served, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """(status, JSON body or None); `path` is sent as written (already percent-encoded)."""
    kwargs: dict[str, Any] = {"headers": served.auth()}
    if body is not None:
        kwargs["json"] = body
    url = URL(served.url + path, encoded=True)
    async with served.client.request(method, url, **kwargs) as response:
        text = await response.text()
        data = json.loads(text) if response.content_type == "application/json" and text else None
        return response.status, data


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    served = await serve(mock_config("- text: hi", extra=TWO_AGENTS), workers=False)
    shared = served.runtime.home.root / "skills"
    make_skill(
        shared,
        "weekly-report",
        "Write the weekly report from the board.",
        "1. Read the board.\n2. Write the report.",
        {"template.md": "# Week\n"},
    )
    make_skill(
        shared,
        "pdf-tools",
        "Split and merge PDF files.",
        "Run `scripts/run.sh`.",
        {"scripts/run.sh": "echo hi\n"},
    )
    install(served.runtime.home, "pdf-tools", verdict="caution")
    own = served.runtime.home.agent_dir("main") / "skills"
    make_skill(own, "groceries", "Plan the groceries for the week.", "Check the fridge.")
    return served


async def test_the_list_has_own_and_shared_skills_with_source_trust_and_verdict(
    served: Served,
) -> None:
    body = await served.get_json("/api/skills/main")
    skills = {s["name"]: s for s in body["skills"]}
    assert [s["name"] for s in body["skills"]] == ["groceries", "pdf-tools", "weekly-report"]
    assert all(set(s) == LISTED for s in body["skills"])
    own = skills["groceries"]
    assert own["shared"] is False and own["scope"] == "own" and own["trusted"] is True
    hand = skills["weekly-report"]
    assert hand["shared"] is True and hand["trusted"] is True
    assert hand["description"] == "Write the weekly report from the board."
    installed = skills["pdf-tools"]
    assert installed["shared"] is True and installed["trusted"] is False
    assert installed["verdict"] == "caution"
    assert "acme/skills/pdf-tools" in installed["source"]
    # Another agent sees the shared skills, never main's own.
    other = await served.get_json("/api/skills/ops")
    assert [s["name"] for s in other["skills"]] == ["pdf-tools", "weekly-report"]


async def test_show_gives_the_body_and_files_and_a_caution_for_an_untrusted_skill(
    served: Served,
) -> None:
    hand = await served.get_json("/api/skills/main/weekly-report")
    assert set(hand) == LISTED | {"body", "files", "caution"}
    assert "2. Write the report." in hand["body"] and "description:" not in hand["body"]
    assert hand["files"] == ["template.md"] and hand["caution"] == ""
    installed = await served.get_json("/api/skills/main/pdf-tools")
    assert installed["files"] == ["scripts/run.sh"]
    assert "has not been approved" in installed["caution"]
    # Reading it on the dashboard is not the agent using it.
    assert installed["last_used"] is None
    listed = await served.get_json("/api/skills/main")
    assert all(s["last_used"] is None for s in listed["skills"])


async def test_approve_trusts_an_installed_skill(served: Served) -> None:
    status, approved = await request(served, "POST", "/api/skills/main/pdf-tools/approve", {})
    assert status == 200, approved
    assert approved["name"] == "pdf-tools" and approved["trusted"] is True
    shown = await served.get_json("/api/skills/main/pdf-tools")
    assert shown["trusted"] is True and shown["caution"] == ""
    entries, _ = read_lock(served.runtime.home.root / "skills")
    assert entries["pdf-tools"].approved is True


async def test_a_dangerous_skill_shows_its_reasons_and_approve_needs_acknowledge(
    served: Served,
) -> None:
    shared = served.runtime.home.root / "skills"
    make_skill(shared, "setup-helper", "Set the machine up.", "Run setup.sh.")
    install(served.runtime.home, "setup-helper", verdict="dangerous", findings=DANGEROUS_FINDINGS)
    reasons = ["scripts/setup.sh:2: a download is piped into a shell", "SKILL.md:4: fetches a URL"]
    shown = await served.get_json("/api/skills/main/setup-helper")
    assert shown["reasons"] == reasons and shown["needs_acknowledgement"] is True
    assert [f["rule"] for f in shown["findings"]] == ["network-fetch", "pipe-to-shell"]
    listed = {s["name"]: s for s in (await served.get_json("/api/skills/main"))["skills"]}
    assert listed["setup-helper"]["reasons"] == reasons
    assert listed["pdf-tools"]["needs_acknowledgement"] is False  # a caution: no friction

    path = "/api/skills/main/setup-helper/approve"
    status, refused = await request(served, "POST", path, {})
    assert status == 409
    assert "found it dangerous" in refused["error"] and '"acknowledge": true' in refused["error"]
    assert refused["skill"]["reasons"] == reasons
    status, bad = await request(served, "POST", path, {"acknowledge": "yes"})
    assert status == 400 and "acknowledge" in bad["error"]
    assert read_lock(shared)[0]["setup-helper"].approved is False  # nothing changed
    status, approved = await request(served, "POST", path, {"acknowledge": True})
    assert status == 200 and approved["trusted"] is True
    assert approved["needs_acknowledgement"] is False
    assert read_lock(shared)[0]["setup-helper"].approved is True


async def test_remove_answers_with_the_backup_and_restore_puts_it_back(served: Served) -> None:
    folder = served.runtime.home.root / "skills" / "weekly-report"
    status, removed = await request(served, "DELETE", "/api/skills/main/weekly-report")
    assert status == 200, removed
    assert removed == {"name": "weekly-report", "backup": removed["backup"]}
    assert removed["backup"]
    assert not folder.exists()
    assert (await request(served, "GET", "/api/skills/main/weekly-report"))[0] == 404
    listed = await served.get_json("/api/skills/main")
    assert "weekly-report" not in [s["name"] for s in listed["skills"]]

    status, restored = await request(served, "POST", "/api/skills/main/weekly-report/restore", {})
    assert status == 200, restored
    assert restored["name"] == "weekly-report" and restored["shared"] is True
    assert (folder / "template.md").read_text(encoding="utf-8") == "# Week\n"
    shown = await served.get_json("/api/skills/main/weekly-report")
    assert "1. Read the board." in shown["body"]


async def test_removing_an_own_skill_leaves_the_shared_ones(served: Served) -> None:
    status, _ = await request(served, "DELETE", "/api/skills/main/groceries")
    assert status == 200
    own = served.runtime.home.agent_dir("main") / "skills" / "groceries"
    assert not own.exists()
    listed = await served.get_json("/api/skills/main")
    assert [s["name"] for s in listed["skills"]] == ["pdf-tools", "weekly-report"]
    status, restored = await request(served, "POST", "/api/skills/main/groceries/restore", {})
    assert status == 200 and restored["scope"] == "own"
    assert (own / "SKILL.md").exists()


async def test_unknown_agents_and_skills_are_404(served: Served) -> None:
    for method, path in (
        ("GET", "/api/skills/nobody"),
        ("GET", "/api/skills/nobody/weekly-report"),
        ("GET", "/api/skills/main/no-such-skill"),
        ("DELETE", "/api/skills/main/no-such-skill"),
        ("POST", "/api/skills/main/no-such-skill/approve"),
        ("POST", "/api/skills/main/no-such-skill/restore"),
        ("GET", "/api/skills/%2e%2e/weekly-report"),
    ):
        status, body = await request(served, method, path, {} if method == "POST" else None)
        assert status == 404, (method, path, status, body)
        assert isinstance(body["error"], str) and body["error"]
    # The ops agent cannot reach main's own skill.
    assert (await request(served, "GET", "/api/skills/ops/groceries"))[0] == 404
    assert (await request(served, "DELETE", "/api/skills/ops/groceries"))[0] == 404
    assert (served.runtime.home.agent_dir("main") / "skills" / "groceries").exists()


@pytest.mark.parametrize(
    "name",
    ["..%2Fx", "%2e%2e", "..", "%2E%2E%2F%2E%2E%2Fskills", "%C3%A9t%C3%A9", "Weekly-Report",
     "-lead", "a%00b", "x" * 65, "weekly%20report", "weekly-report%0A"],
)  # fmt: skip
async def test_a_hostile_or_bad_name_is_400_on_every_route(served: Served, name: str) -> None:
    for method, path in (
        ("GET", f"/api/skills/main/{name}"),
        ("DELETE", f"/api/skills/main/{name}"),
        ("POST", f"/api/skills/main/{name}/approve"),
        ("POST", f"/api/skills/main/{name}/restore"),
    ):
        status, body = await request(served, method, path, {} if method == "POST" else None)
        assert status == 400, (method, path, status, body)
        assert "not a skill name" in body["error"]
    # Nothing was removed or restored on the way.
    listed = await served.get_json("/api/skills/main")
    assert [s["name"] for s in listed["skills"]] == ["groceries", "pdf-tools", "weekly-report"]


async def test_the_action_bodies_are_strict(served: Served) -> None:
    status, body = await request(served, "POST", "/api/skills/main/pdf-tools/approve", {"x": 1})
    assert status == 400 and "unknown field" in body["error"]
    async with served.client.post(
        served.url + "/api/skills/main/pdf-tools/approve", headers=served.auth()
    ) as response:
        assert response.status in (400, 415)
    assert (await served.get_json("/api/skills/main/pdf-tools"))["trusted"] is False


async def test_the_skills_routes_need_the_token(served: Served) -> None:
    for method, path in (
        ("GET", "/api/skills/main"),
        ("GET", "/api/skills/main/weekly-report"),
        ("DELETE", "/api/skills/main/weekly-report"),
        ("POST", "/api/skills/main/pdf-tools/approve"),
    ):
        async with served.client.request(method, served.url + path, json={}) as response:
            assert response.status == 401, (method, path)
    assert (served.runtime.home.root / "skills" / "weekly-report").exists()
    assert (await served.get_json("/api/skills/main/pdf-tools"))["trusted"] is False


async def test_a_process_without_a_skills_service_answers_501(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(served.runtime, "skills", None)
    status, body = await request(served, "GET", "/api/skills/main")
    assert status == 501 and "no skills service" in body["error"]
