"""Unused snapshots under pytest-xdist: each worker's list, merged by the controller.

syrupy fails a run that leaves a stored snapshot unused (a renamed or deleted test's SVG
left behind), but only in a run of one process: under xdist each worker sees a part of
the tests and syrupy skips the check (its report says so in a TODO). So each worker
sends the controller what it used and what it would have called unused, and the
controller fails the run for a snapshot that some worker called unused and none used:
syrupy's own rule, applied to the whole run.

A worker's syrupy session is taken from the tests' `svg_snapshot` fixture
(`remember_session`), the public way to it.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

SESSION = pytest.StashKey[Any]()
REPORTS = pytest.StashKey[list[dict[str, list[str]]]]()
UNUSED = pytest.StashKey[list[str]]()


def remember_session(config: pytest.Config, snapshot: SnapshotAssertion) -> None:
    """Note the worker's syrupy session, whose report the worker sends at its end."""
    config.stash[SESSION] = snapshot.session


def _names(collections: Any) -> list[str]:
    """ "<file>::<snapshot name>" for every snapshot of syrupy's collections."""
    return sorted(
        f"{collection.location}::{snapshot.name}"
        for collection in collections
        for snapshot in collection
    )


@pytest.hookimpl(trylast=True)  # after syrupy's own (tryfirst), which builds the report
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        snapshots = config.stash.get(SESSION, None)
        report = getattr(snapshots, "report", None)
        if report is not None:
            workeroutput["snapshots"] = {
                "used": _names(report.used),
                "unused": _names(report.unused),
            }
        return
    reports = config.stash.get(REPORTS, [])
    unused = _unused(reports)
    if not unused:
        return
    options = config.option
    if getattr(options, "warn_unused_snapshots", False):
        return
    config.stash[UNUSED] = unused
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _unused(reports: list[dict[str, list[str]]]) -> list[str]:
    used = {name for report in reports for name in report["used"]}
    return sorted({name for report in reports for name in report["unused"]} - used)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist: a worker ended; keep what it said of the snapshots."""
    said = getattr(node, "workeroutput", {}).get("snapshots")
    if said is not None:
        node.config.stash.setdefault(REPORTS, []).append(said)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    unused = config.stash.get(UNUSED, [])
    if not unused:
        return
    root = str(config.rootpath) + os.sep
    terminalreporter.section("unused snapshots", red=True)
    for name in unused:
        terminalreporter.line(name.removeprefix(root))
    terminalreporter.line(
        "no test uses these stored snapshots: delete them, or run `pytest -n 0 "
        "--snapshot-update` (syrupy deletes unused snapshots only in one process)"
    )
