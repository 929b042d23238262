"""What the editor is shown of our tools and what its prompt blocks become (the pure
mapping the process tests exercise end to end)."""

from __future__ import annotations

from pathlib import Path

from acp import (
    embedded_blob_resource,
    embedded_text_resource,
    image_block,
    resource_block,
    resource_link_block,
    text_block,
)

from habakkuk.protocols.acp.mapping import (
    diff_content,
    locations,
    plan_entries,
    prompt_text,
    tool_kind,
)

WORKSPACE = Path("/work/project")


def test_tools_map_to_the_editors_kinds() -> None:
    kinds = {name: tool_kind(name) for name in ("read_file", "apply_patch", "exec")}
    assert kinds == {"read_file": "read", "apply_patch": "edit", "exec": "execute"}
    assert tool_kind("search_files") == "search" and tool_kind("fetch_url") == "fetch"
    assert tool_kind("mcp_server_tool") == "other"


def test_locations_are_absolute_with_the_line_a_read_starts_at() -> None:
    read = locations({"path": "src/app.py", "offset": 40}, WORKSPACE)
    assert [(loc.path, loc.line) for loc in read] == [("/work/project/src/app.py", 40)]
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n*** Add File: /tmp/b.py\n*** End Patch"
    touched = locations({"patch": patch}, WORKSPACE)
    assert [loc.path for loc in touched] == ["/work/project/a.py", "/tmp/b.py"]
    assert locations({"command": "ls"}, WORKSPACE) == []


def test_writes_and_edits_show_their_change_as_a_diff() -> None:
    [written] = diff_content("write_file", {"path": "n.txt", "content": "new"}, WORKSPACE)
    shown = (written.path, written.old_text, written.new_text)
    assert shown == ("/work/project/n.txt", None, "new")
    given = {"path": "n.txt", "old_string": "a", "new_string": "b"}
    [edited] = diff_content("edit_file", given, WORKSPACE)
    assert (edited.old_text, edited.new_text) == ("a", "b")
    assert diff_content("exec", {"command": "rm -rf x"}, WORKSPACE) == []


def test_a_plan_keeps_known_statuses_and_priorities_only() -> None:
    entries = plan_entries(
        {
            "entries": [
                {"content": "one", "status": "completed", "priority": "high"},
                {"content": "two", "status": "sideways", "priority": "urgent"},
                {"status": "pending"},
            ]
        }
    )
    assert [(e.content, e.status, e.priority) for e in entries] == [
        ("one", "completed", "high"),
        ("two", "pending", "medium"),
    ]


def test_prompt_blocks_become_the_turns_text() -> None:
    text = prompt_text(
        [
            text_block("Fix this:"),
            resource_block(embedded_text_resource("file:///work/project/a.py", "x = 1")),
            resource_link_block("b.py", "file:///work/project/b.py"),
            resource_block(embedded_blob_resource("file:///work/project/c.bin", "AAAA")),
            image_block("AAAA", "image/png"),
        ]
    )
    assert text.split("\n\n") == [
        "Fix this:",
        "[file: file:///work/project/a.py]\n```\nx = 1\n```",
        "[file: file:///work/project/b.py]",
        "[file: file:///work/project/c.bin (binary, not included)]",
        "[image not supported here; left out]",
    ]
