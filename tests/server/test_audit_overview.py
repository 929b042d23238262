"""The security audit's findings in GET /api/overview (the dashboard's overview) and in
the control room's read the terminal's overview shows."""

from __future__ import annotations

from typing import Any

from habakkuk.engine.home import Home
from habakkuk.screens.audit_block import audit_text
from tests.conftest import mock_config


async def test_the_overview_counts_and_lists_the_audit_findings(serve: Any, home: Home) -> None:
    env = home.env_path
    env.write_text("SOME_KEY=x\n", encoding="utf-8")
    env.chmod(0o644)
    served = await serve(mock_config(extra="http:\n  metrics: {public: true}\n"))
    runtime = served.runtime
    body = await served.get_json("/api/overview")
    audit = body["audit"]
    findings = {(f["severity"], f["subject"]) for f in audit["findings"]}
    assert ("high", ".env") in findings
    assert ("medium", "agents.main") in findings  # mock_config's agent runs in full mode
    assert ("low", "http.metrics.public") in findings
    assert audit["counts"]["high"] == 1 and audit["counts"]["critical"] == 0
    assert sum(audit["counts"].values()) == len(audit["findings"])
    high = next(f for f in audit["findings"] if f["subject"] == ".env")
    assert high["fix"] == f"chmod 600 {env}"
    # no database the runtime wrote is open to others
    assert not [f for f in audit["findings"] if f["subject"].endswith(".db")]

    view = await runtime.control.overview()
    text = audit_text(view.findings)
    assert text.splitlines()[0].startswith("critical 0, high 1, medium")
    assert "HIGH .env: credentials readable by its group and other users" in text
    assert text.splitlines()[-1].startswith("each finding's fix: habakkuk security audit")
