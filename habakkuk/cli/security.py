"""`habakkuk security audit [--fix]`: the security audit (habakkuk.services.audit), worst
first, each finding with its fix; --fix applies the permission changes and nothing else.
The exit code is 1 while a high or critical finding remains."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.audit_findings import Finding
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Home


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """`habakkuk security audit [--fix]`."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = actions.add_parser("audit", help="check the home and the config for what is unsafe")
    run.add_argument(
        "--fix", action="store_true", help="apply the permission changes (chmod) it names"
    )


def main(args: argparse.Namespace) -> int:
    """Print the findings (after --fix, what remains); 1 while a high one remains."""
    from habakkuk.services.audit import apply_fixes, audit

    home = current_home()
    config = _config(home)
    findings = audit(home, config)
    if args.fix:
        fixable = [finding for finding in findings if finding.chmod is not None]
        failed = apply_fixes(fixable)
        broken = {id(finding) for finding, _ in failed}
        for finding in fixable:
            if id(finding) not in broken:
                print(t("audit.fixed", fix=finding.fix))
        for finding, reason in failed:
            print(t("audit.fix_failed", path=finding.path, reason=reason))
        if fixable:
            print()
        findings = audit(home, config)
    for line in report_lines(findings):
        print(line)
    return EXIT_FAILED if any(finding.blocking for finding in findings) else EXIT_OK


def _config(home: Home) -> Config | None:
    """The home's config; None when there is none yet (only the files are checked). An
    invalid config stops the audit with its one-line error, as in every command."""
    from habakkuk.engine.config import load_config

    if not home.config_path.exists():
        return None
    return load_config(home)


def report_lines(findings: list[Finding]) -> list[str]:
    """The findings as the terminal shows them: a line each with its fix below, then the
    count by severity."""
    from habakkuk.engine.audit_findings import summary_line

    lines = []
    for finding in findings:
        lines.append(severity_line(finding))
        if finding.fix != t("audit.fix_none"):
            lines.append(f"    {t('audit.fix_label')}: {finding.fix}")
    if not any(finding.severity != "info" for finding in findings):
        return [*lines, t("audit.clean")]
    lines.append(summary_line(findings))
    return lines


def severity_line(finding: Finding) -> str:
    """`HIGH  subject: problem`, the severity in the language in use."""
    label = t(f"audit.severity.{finding.severity}")
    return f"{label:<9} {finding.subject}: {finding.problem}"
