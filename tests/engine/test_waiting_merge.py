"""merge_waiting: one list of this process's hub requests and control.db's chat approvals."""

from __future__ import annotations

from habakkuk.engine.toolkit.approvals import ApprovalRequest
from habakkuk.engine.toolkit.waiting import WaitingApproval, merge_waiting


def request(approval_id: str, tool: str = "exec") -> ApprovalRequest:
    return ApprovalRequest(
        "main", "ses_1", "turn_1", tool, {"command": "ls"}, "", reason="", id=approval_id
    )


def chat(approval_id: str, since: float, where: str = "tg:42") -> WaitingApproval:
    return WaitingApproval(
        approval_id, "exec", "ls", "", "main", "ses_2", "turn_2", since, where, local=False
    )


def test_a_chat_approval_of_this_process_is_listed_once_as_local_with_its_chat() -> None:
    merged = merge_waiting(
        [request("apr_a")], [chat("apr_a", 5.0)], since=lambda _: 99.0, now=100.0
    )
    [only] = merged
    assert only.local is True
    assert only.where == "tg:42"
    assert only.since == 5.0  # the prompt's time, not the hub's
    assert only.input == {"command": "ls"}


def test_both_sources_are_merged_oldest_first() -> None:
    since = {"apr_t": 20.0}
    merged = merge_waiting(
        [request("apr_t"), request("apr_w")],
        [chat("apr_x", 30.0), chat("apr_y", 10.0, "slack:C1:T9")],
        since=since.get,
        where={"apr_w": "web"},
        now=40.0,
    )
    assert [(a.id, a.where, a.local) for a in merged] == [
        ("apr_y", "slack:C1:T9", False),
        ("apr_t", "terminal", True),
        ("apr_x", "tg:42", False),
        ("apr_w", "web", True),  # no known arrival time: now
    ]


def test_text_is_the_summary_else_the_arguments_on_one_line() -> None:
    [local] = merge_waiting([request("apr_a")], [], since=lambda _: 1.0, now=2.0)
    assert local.text == '{"command": "ls"}'
    assert chat("apr_b", 1.0).text == "ls"
