"""The hardline blocklist against two corpora, each asserted in full: a failure lists every miss."""

from __future__ import annotations

from habakkuk.tools.hardline import check_hardline
from tests.tools.hardline_corpora import MUST_BLOCK, MUST_PASS


def test_every_must_block_command_is_blocked_with_a_one_line_reason() -> None:
    missed = [command for command in MUST_BLOCK if not check_hardline(command)]
    assert not missed, f"{len(missed)} not blocked:\n" + "\n".join(missed)
    reasons = {command: check_hardline(command) or "" for command in MUST_BLOCK}
    multiline = [command for command, reason in reasons.items() if "\n" in reason]
    assert not multiline, multiline


def test_no_must_pass_command_is_blocked() -> None:
    refused = [
        f"{command}  ->  {reason}"
        for command in MUST_PASS
        if (reason := check_hardline(command)) is not None
    ]
    assert not refused, f"{len(refused)} wrongly blocked:\n" + "\n".join(refused)


def test_corpora_are_distinct_and_large_enough() -> None:
    assert len(MUST_PASS) >= 60
    assert not set(MUST_BLOCK) & set(MUST_PASS)
    assert len(set(MUST_BLOCK)) == len(MUST_BLOCK)
    assert len(set(MUST_PASS)) == len(MUST_PASS)
