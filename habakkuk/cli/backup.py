"""`habakkuk backup` and `habakkuk restore`: the home in one verified archive, and back.

The work is habakkuk.services.backup's and habakkuk.services.restore's; this module
parses, prints the outcome and turns a refusal into one stderr line. The standard
library only at the top.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from habakkuk.cli.common import current_home
from habakkuk.engine.exit_codes import EXIT_OK, error_line, exit_code


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `backup` or `restore`."""
    if command == "restore":
        parser.add_argument("file", metavar="FILE", type=Path, help="a habakkuk backup archive")
        parser.add_argument(
            "--force", action="store_true", help="replace the home's existing config.yaml"
        )
        return
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        help="where to write it (default: ./habakkuk-backup-YYYYMMDD-HHMMSS.tar.gz)",
    )
    parser.add_argument(
        "--env",
        action="store_true",
        help="add the credentials: .env, auth.json and the WhatsApp device databases",
    )
    parser.add_argument(
        "--workspaces", action="store_true", help="add the agents' default workspaces"
    )
    parser.add_argument("--blobs", action="store_true", help="add blobs/ (tool outputs, media)")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk backup` or `habakkuk restore` (the exit code)."""
    from habakkuk.engine.errors import HabakkukError, shown

    command = "restore" if args.command == "restore" else "backup"
    try:
        return _restore(args) if command == "restore" else _backup(args)
    except HabakkukError as exc:
        print(error_line(command, shown(exc)), file=sys.stderr)
        return exit_code(exc)


def _backup(args: argparse.Namespace) -> int:
    from habakkuk.engine.i18n import t
    from habakkuk.services.backup import default_name, take_backup
    from habakkuk.services.backup_layout import Options

    home = current_home()
    if not home.root.is_dir():
        from habakkuk.services.backup_archive import BackupError

        raise BackupError.said("backup.no_home", home=home.root)
    url = _postgres_url(home.root)
    output = args.output or Path.cwd() / default_name()
    options = Options(env=args.env, workspaces=args.workspaces, blobs=args.blobs)
    report = take_backup(home.root, output, options, postgres_url=url)
    manifest = report.manifest
    print(
        t(
            "backup.written",
            path=report.path,
            size=_size(report.size),
            files=len(manifest.files) - len(manifest.databases),
            databases=len(manifest.databases),
        )
    )
    print(t("backup.verified"))
    if report.postgres is not None:
        if report.postgres.dumped:
            print(t("backup.pg_dumped", url=report.postgres.url))
        else:
            print(t("backup.pg_not_dumped", url=report.postgres.url, reason=report.postgres.reason))
    if args.env:
        print(t("backup.has_secrets"))
    if report.config_secret:
        print(t("backup.config_secret", what=report.config_secret), file=sys.stderr)
    return EXIT_OK


def _postgres_url(root: Path) -> str | None:
    """The home's PostgreSQL URL (HABAKKUK_DATABASE_URL or storage.url), else None."""
    import os

    from habakkuk.engine.config import load_config
    from habakkuk.engine.home import Home
    from habakkuk.engine.storage import URL_ENV, storage_url

    home = Home(root)
    if not home.config_path.exists():
        return os.environ.get(URL_ENV, "").strip() or None
    return storage_url(load_config(home))


def _restore(args: argparse.Namespace) -> int:
    from habakkuk.engine.i18n import t
    from habakkuk.services.restore import restore

    home = current_home()
    report = restore(args.file, home.root, force=args.force)
    print(
        t(
            "backup.restored",
            path=args.file,
            home=report.home,
            files=report.files,
            databases=report.databases,
            created=report.manifest.created,
        )
    )
    if report.pg_dump is not None:
        print(t("backup.pg_restore_hint", path=report.pg_dump))
    return EXIT_OK


def _size(size: int) -> str:
    """Bytes for people: 1.2 MB."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
