"""Exports: Markdown rendered in the HTML page (its HTML escaped), tool results labelled as
such, and files written under HOME/exports/ unless a path is given."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.export import export_transcript
from habakkuk.engine.llm.types import Message, TextBlock, ToolResultBlock, ToolUseBlock
from habakkuk.engine.sessions import TranscriptStore
from tests.conftest import mock_config

HOSTILE = (
    "# Plan\n\nSome **bold** and `code`.\n\n- one\n- two\n\n"
    "<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3))"
)


async def transcript(store: TranscriptStore) -> tuple[Any, list[Any]]:
    await store.create_session("s1", "main", "")
    await store.append("s1", Message.user_text(HOSTILE))
    await store.append(
        "s1",
        Message(
            "assistant",
            [
                TextBlock("Reading *both*."),
                ToolUseBlock("c1", "read_file", {"path": "a.txt"}),
                ToolUseBlock("c2", "exec", {"command": "ls"}),
            ],
        ),
    )
    await store.append(
        "s1",
        Message(
            "user",
            [ToolResultBlock("c1", "<b>file</b> text"), ToolResultBlock("c2", "no", True)],
        ),
    )
    await store.append("s1", Message("assistant", [ToolUseBlock("c3", "read_file", {})]))
    await store.append("s1", Message("user", [ToolResultBlock("c3", "```\nfenced\n```")]))
    session = await store.get_session("s1")
    return session, await store.messages("s1")


async def test_the_html_export_renders_markdown_and_escapes_the_html_in_it(
    store: TranscriptStore,
) -> None:
    session, stored = await transcript(store)
    page = export_transcript(session, stored, "html")
    assert "<h1>Plan</h1>" in page and "<strong>bold</strong>" in page
    assert "<code>code</code>" in page and "<li>one</li>" in page
    assert "<em>both</em>" in page
    # Raw HTML in a message is shown as text, never run; script links are not links.
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert 'href="javascript' not in page
    # Tool output stays verbatim and escaped.
    assert "&lt;b&gt;file&lt;/b&gt; text" in page and "<b>file</b>" not in page


async def test_the_markdown_export_labels_tool_results_by_their_tool(
    store: TranscriptStore,
) -> None:
    session, stored = await transcript(store)
    markdown = export_transcript(session, stored, "md")
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == [
        "## User · #0",
        "## Assistant · #1",
        "## Tool results · read_file, exec · #2",
        "## Assistant · #3",
        "## Tool result · read_file · #4",
    ]
    assert "**tool result** `read_file` (c1)" in markdown
    assert "**tool error** `exec` (c2)" in markdown
    # A result holding a code fence cannot close the block it sits in.
    assert "````\n```\nfenced\n```\n````" in markdown
    page = export_transcript(session, stored, "html")
    assert "Tool results · read_file, exec · #2" in page


async def test_exports_go_under_home_exports_unless_a_path_is_given(
    runtime_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runtime = await runtime_factory(mock_config())
    session = await runtime.sessions.new_session()
    await runtime.transcripts.append(session.id, Message.user_text("hello"))
    where = Path(await runtime.sessions.save_export(session.id, "md"))
    assert where == runtime.home.root / "exports" / f"{session.id}.md"
    assert where == Path(runtime.sessions.export_default(session.id, "md"))
    assert "hello" in where.read_text()
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    assert not list(tmp_path.glob("ses_*"))  # nothing in the folder it was started from
    nested = Path(await runtime.sessions.save_export(session.id, "html", "deep/er/page.html"))
    assert nested == Path("deep/er/page.html") and (tmp_path / nested).is_file()
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(HabakkukError) as raised:
        await runtime.sessions.save_export(session.id, "json", str(tmp_path / "plain" / "x.json"))
    message = str(raised.value)
    assert message.startswith(f"cannot write {tmp_path / 'plain' / 'x.json'}: ")
    assert "\n" not in message
