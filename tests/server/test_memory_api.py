"""The memory's HTTP API (spec 001 "Memory", "Memory history") against the real runtime."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from habakkuk.knowledge.memory_types import ProposalCreated, Provenance
from tests.conftest import mock_config
from tests.server.conftest import Served, ServeFactory

TWO_AGENTS = "  ops:\n    model: mock/scripted\n    mode: full\ntimezone: UTC\n"


async def request(
    served: Served, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, Any]:
    """(status, JSON body or None) of one request with the token."""
    kwargs: dict[str, Any] = {"headers": served.auth(**headers)}
    if body is not None:
        raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
        # As a stream: aiohttp warns (ResourceWarning) about a body over 1 MB in memory.
        kwargs["data"] = io.BytesIO(raw.encode() if isinstance(raw, str) else raw)
        kwargs["headers"].setdefault("Content-Type", "application/json")
    async with served.client.request(method, served.url + path, **kwargs) as response:
        text = await response.text()
        data = None
        if response.content_type == "application/json" and text:
            data = await response.json()
        return response.status, data


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    return await serve(mock_config("- text: hi", extra=TWO_AGENTS), workers=False)


async def test_a_note_is_created_replaced_listed_searched_renamed_and_deleted(
    served: Served,
) -> None:
    note = {"title": "Coffee preference", "content": "Flat white with oat milk.", "tags": ["food"]}
    status, created = await request(served, "POST", "/api/memory/main", note)
    assert status == 201, created
    slug = created["slug"]
    assert created["title"] == "Coffee preference" and created["tags"] == ["food"]
    assert created["source"] == "user" and created["trust"] == "trusted"
    assert created["body"].strip() == "Flat white with oat milk."
    status, replaced = await request(
        served, "POST", "/api/memory/main", {**note, "content": "Flat white, oat milk, no sugar."}
    )
    assert status == 200 and replaced["slug"] == slug
    assert replaced["created_at"] == created["created_at"]

    listing = await served.get_json("/api/memory/main")
    assert listing["total"] == 1
    assert [m["slug"] for m in listing["memories"]] == [slug]
    assert "body" not in listing["memories"][0]
    found = await served.get_json("/api/memory/main?q=sugar")
    assert [m["slug"] for m in found["memories"]] == [slug]
    assert "[sugar]" in found["memories"][0]["snippet"]
    assert (await served.get_json("/api/memory/main?tags=food"))["total"] == 1
    assert (await served.get_json("/api/memory/main?tags=food,nope"))["total"] == 0
    assert (await served.get_json("/api/memory/ops"))["total"] == 0  # another agent's memory
    one = await served.get_json(f"/api/memory/main/{slug}")
    assert one["body"].strip() == "Flat white, oat milk, no sugar."

    status, renamed = await request(
        served, "PUT", f"/api/memory/main/{slug}", {"title": "Coffee order", "content": "Espresso."}
    )
    assert status == 200, renamed
    assert renamed["slug"] != slug and renamed["tags"] == ["food"]  # tags omitted: kept
    assert (await request(served, "GET", f"/api/memory/main/{slug}"))[0] == 404
    status, _ = await request(served, "DELETE", f"/api/memory/main/{renamed['slug']}")
    assert status == 204
    assert (await request(served, "GET", f"/api/memory/main/{renamed['slug']}"))[0] == 404
    trash = served.runtime.home.root / "agents" / "main" / "memory" / ".trash"
    assert any(p.name.startswith(renamed["slug"]) for p in trash.iterdir())
    assert (await served.get_json("/api/memory/main"))["total"] == 0


async def test_the_history_shows_each_change_with_its_diff_and_restore_puts_it_back(
    served: Served,
) -> None:
    first = {"title": "Plants", "content": "Water the basil on Mondays."}
    _, note = await request(served, "POST", "/api/memory/main", first)
    await request(served, "POST", "/api/memory/main", {**first, "content": "Water it daily."})
    pinned = {"title": "Keys", "content": "Spare under the mat.", "tags": ["pinned"]}
    await request(served, "POST", "/api/memory/main", pinned)
    history = await served.get_json("/api/memory-history/main?file=" + note["slug"])
    assert [c["op"] for c in history["changes"]] == ["updated", "created"]
    update = history["changes"][0]
    assert update["by"] == "user" and update["kind"] == "note" and update["tainted"] is False
    assert set(update) == {
        "id", "agent", "kind", "name", "path", "op", "old_hash", "new_hash", "by", "tool",
        "session", "tainted", "note", "restores", "at",
    }  # fmt: skip
    assert history["pins"] == [{"kind": "note", "name": "keys"}]

    detail = await served.get_json(f"/api/memory-history/main/{update['id'][:4]}")
    assert detail["id"] == update["id"]
    assert "-Water the basil on Mondays." in detail["diff"]
    assert "+Water it daily." in detail["diff"]

    status, restored = await request(
        served, "POST", f"/api/memory-history/main/{update['id']}/restore", {}
    )
    assert status == 200, restored
    assert restored["unchanged"] is False and restored["restored"]["restores"] == update["id"]
    assert restored["restored"]["by"] == "user"
    body = (await served.get_json(f"/api/memory/main/{note['slug']}"))["body"]
    assert body.strip() == "Water the basil on Mondays."
    _, again = await request(
        served, "POST", f"/api/memory-history/main/{update['id']}/restore", {"version": "before"}
    )
    assert again == {"restored": None, "unchanged": True}
    _, redo = await request(
        served, "POST", f"/api/memory-history/main/{update['id']}/restore", {"version": "after"}
    )
    assert redo["unchanged"] is False
    body = (await served.get_json(f"/api/memory/main/{note['slug']}"))["body"]
    assert body.strip() == "Water it daily."
    kinds = await served.get_json("/api/memory-history/main?kind=profile")
    assert kinds["changes"] == []
    assert len((await served.get_json("/api/memory-history/main?limit=1"))["changes"]) == 1


async def test_an_untrusted_note_is_marked_until_the_user_trusts_it(served: Served) -> None:
    tainted = Provenance(by="agent", session="ses_x", tool="memory_save", tainted=True)
    saved = await served.runtime.memory.save(
        "main", "Build server", "It lives at build.example.org.", provenance=tainted
    )
    slug = saved.note.slug
    assert (await served.get_json(f"/api/memory/main/{slug}"))["trust"] == "untrusted"
    assert (await served.get_json("/api/memory/main"))["memories"][0]["trust"] == "untrusted"
    status, trusted = await request(served, "POST", f"/api/memory/main/{slug}/trust", {})
    assert status == 200, trusted
    assert trusted["trust"] == "trusted"
    assert (await served.get_json(f"/api/memory/main/{slug}"))["trust"] == "trusted"


async def test_a_proposal_is_listed_then_applied_or_dismissed(served: Served) -> None:
    assert await served.get_json("/api/memory-proposals/main") == {"proposals": []}
    memory = served.runtime.memory
    review = Provenance(by="review", session="ses_r", tool="memory_review")
    for title in ("Old router", "Old phone"):
        await memory.save("main", title, f"The {title.lower()} is in the drawer.",
                          provenance=Provenance(by="user"))  # fmt: skip
        with pytest.raises(ProposalCreated):
            await memory.forget("main", title.lower().replace(" ", "-"), provenance=review)
    listed = (await served.get_json("/api/memory-proposals/main"))["proposals"]
    assert [(p["action"], p["name"], p["by"]) for p in listed] == [
        ("forget", "old-router", "review"),
        ("forget", "old-phone", "review"),
    ]
    assert set(listed[0]) == {
        "id", "agent", "action", "name", "title", "content", "reason", "by", "session", "at"
    }  # fmt: skip
    status, applied = await request(
        served, "POST", f"/api/memory-proposals/main/{listed[0]['id']}", {"apply": True}
    )
    assert status == 200 and applied["applied"] is True
    assert applied["proposal"]["id"] == listed[0]["id"]
    assert (await request(served, "GET", "/api/memory/main/old-router"))[0] == 404
    status, dismissed = await request(
        served, "POST", f"/api/memory-proposals/main/{listed[1]['id']}", {"apply": False}
    )
    assert status == 200 and dismissed["applied"] is False
    assert (await served.get_json("/api/memory/main/old-phone"))["slug"] == "old-phone"
    assert await served.get_json("/api/memory-proposals/main") == {"proposals": []}
    status, _ = await request(
        served, "POST", f"/api/memory-proposals/main/{listed[1]['id']}", {"apply": True}
    )
    assert status == 404  # no longer open
    status, body = await request(served, "POST", "/api/memory-proposals/main/prop_nope",
                                 {"apply": True})  # fmt: skip
    assert status == 404 and body["error"]
    status, body = await request(served, "POST", "/api/memory-proposals/main/prop_nope",
                                 {"apply": "yes"})  # fmt: skip
    assert status == 400 and "apply" in body["error"]


HOSTILE_BODIES = [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'"a string"', 400, "JSON object"),
    (b"", 400, "empty"),
    (b'{"title": "T", "content": "c", "owner": "me"}', 400, "unknown field 'owner'"),
    (b'{"title": 5, "content": "c"}', 400, "title must be a string"),
    (b'{"title": "T", "content": ["c"]}', 400, "content must be a string"),
    (b'{"title": "T", "content": "c", "tags": "a,b"}', 400, "tags must be a list"),
    (b'{"title": "T", "content": "c", "tags": [1]}', 400, "tags must be a list of strings"),
    (b'{"content": "c"}', 400, "title is required"),
    (b'{"title": "  ", "content": "c"}', 400, "title must not be empty"),
]


@pytest.mark.parametrize(("raw", "status", "said"), HOSTILE_BODIES)
async def test_a_bad_body_is_a_clear_400(
    served: Served, raw: bytes, status: int, said: str
) -> None:
    got, body = await request(served, "POST", "/api/memory/main", raw)
    assert got == status and said in body["error"], body
    assert (await served.get_json("/api/memory/main"))["total"] == 0


async def test_hostile_paths_sizes_and_secrets_are_refused_without_writing(
    served: Served,
) -> None:
    home = served.runtime.home.root
    before = {p for p in home.rglob("*") if p.is_file()}
    note = {"title": "T", "content": "c"}
    for path in (
        "/api/memory/nobody",
        "/api/memory/nobody/x",
        "/api/memory-history/nobody",
        "/api/memory-proposals/nobody",
        "/api/memory/..%2Fmain",
        "/api/memory/main/..%2F..%2F..%2Fconfig.yaml",
        "/api/memory/main/%2E%2E",
        "/api/memory/main/..%2Fmemory.db",
        "/api/memory-history/main/zzzz",
    ):
        status, body = await request(served, "GET", path)
        assert status in (400, 404), (path, status, body)
        assert body["error"], path
    for method, path in (
        ("POST", "/api/memory/nobody"),
        ("PUT", "/api/memory/main/..%2F..%2Fconfig.yaml"),
        ("DELETE", "/api/memory/main/..%2F..%2Fconfig.yaml"),
        ("POST", "/api/memory/main/..%2F..%2Fconfig.yaml/trust"),
    ):
        status, body = await request(served, method, path, {} if "trust" in path else note)
        assert status in (400, 404), (method, path, status, body)
    assert (home / "config.yaml").exists()

    huge = {"title": "Big", "content": "x" * (2 * 1024 * 1024)}
    status, body = await request(served, "POST", "/api/memory/main", huge)
    assert status == 413 and body["error"]
    status, body = await request(served, "POST", "/api/memory/main", note,
                                 **{"Content-Type": "text/plain"})  # fmt: skip
    assert status == 415
    secret = {"title": "AWS", "content": "the key is AKIAIOSFODNN7EXAMPLE, keep it"}
    status, body = await request(served, "POST", "/api/memory/main", secret)
    assert status == 400 and "\n" not in body["error"]
    assert "AKIAIOSFODNN7EXAMPLE" not in body["error"]
    for path, said in (
        ("/api/memory/main?limit=0", "limit"),
        ("/api/memory/main?limit=x", "limit"),
        ("/api/memory-history/main?kind=bogus", "kind"),
        ("/api/memory-history/main?since=yesteryear", ""),
        ("/api/memory/main?q=" + "w" * 2000, "q"),
    ):
        status, body = await request(served, "GET", path)
        assert status == 400 and said in body["error"], (path, body)
    status, body = await request(served, "POST", "/api/memory-history/main/abcd/restore",
                                 {"version": "sideways"})  # fmt: skip
    assert status == 400 and "version" in body["error"]
    after = {p for p in home.rglob("*") if p.is_file()}
    written = {p for p in after - before if "/memory/" in str(p) and p.suffix == ".md"}
    assert written == set()


async def test_the_memory_api_needs_the_token(served: Served) -> None:
    for method, path in (("GET", "/api/memory/main"), ("GET", "/api/memory-history/main"),
                         ("POST", "/api/memory/main")):  # fmt: skip
        async with served.client.request(
            method, served.url + path, json={"title": "T", "content": "c"}
        ) as response:
            assert response.status == 401
    assert (await served.get_json("/api/memory/main"))["total"] == 0


def _tokens(secret: str) -> list[str]:
    """The distinctive parts of a secret sample (what must never reach a file)."""
    parts = secret.replace("\n", " ").split()
    return [p for p in parts if len(p) > 8 and any(c.isdigit() for c in p)] or [secret]


async def test_no_secret_of_the_corpus_is_stored_through_the_api_or_the_web_chat(
    served: Served,
) -> None:
    from tests.knowledge.secrets_corpus import SECRETS

    status, kept = await request(
        served, "POST", "/api/memory/main", {"title": "Kept", "content": "Harmless."}
    )
    assert status == 201
    for name, secret in SECRETS.items():
        for method, path, body in (
            ("POST", "/api/memory/main", {"title": f"About {name}", "content": secret}),
            ("POST", "/api/memory/main", {"title": secret[:60], "content": "x"}),
            ("POST", "/api/memory/main", {"title": "T", "content": "x", "tags": [secret]}),
            ("PUT", f"/api/memory/main/{kept['slug']}", {"title": "Kept", "content": secret}),
        ):
            status, said = await request(served, method, path, body)
            assert status == 400, (name, method, body, said)
            assert "\n" not in said["error"]
            assert not any(token in said["error"] for token in _tokens(secret)), name
        chat = await served.post_json(
            "/api/chat", {"conversation": "c", "text": f"/remember {secret}"}, status=202
        )
        assert chat["message"].startswith("/remember: "), (name, chat)
    agents = served.runtime.home.root / "agents"
    stored = b"".join(p.read_bytes() for p in agents.rglob("*") if p.is_file())
    for name, secret in SECRETS.items():
        assert not any(token.encode() in stored for token in _tokens(secret)), name
    assert (await served.get_json(f"/api/memory/main/{kept['slug']}"))["body"].strip() == (
        "Harmless."
    )
