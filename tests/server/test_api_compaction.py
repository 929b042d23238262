"""GET /api/sessions/{id} says where a compaction's summary applies."""

from __future__ import annotations

from tests.conftest import mock_config
from tests.server.conftest import ServeFactory


async def test_session_json_has_the_compaction_when_there_is_one(serve: ServeFactory) -> None:
    served = await serve(mock_config('- "reply"'), workers=False)
    runtime = served.runtime
    session = await runtime.sessions.new_session("main")
    await runtime.sessions.seed_session(
        session.id, [("user", "one"), ("assistant", "1"), ("user", "two"), ("assistant", "2")]
    )
    body = await served.get_json(f"/api/sessions/{session.id}")
    assert "compaction" not in body
    assert await runtime.transcripts.add_compaction(session.id, "SUMMARY of one", 2, 3, None)
    body = await served.get_json(f"/api/sessions/{session.id}")
    assert body["compaction"] == {"keep_from": 2, "summary": "SUMMARY of one"}
    assert [m["seq"] for m in body["messages"]] == [0, 1, 2, 3]
