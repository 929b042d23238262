"""`habakkuk plugins list|show|install|update|enable|disable|remove`.

The parser is declared with the standard library only (habakkuk/cli/entry.py builds it).
The commands work on HOME/plugins and its lock file directly (knowledge/plugins), without
opening the runtime: enabling a plugin changes what the next load of the config merges
(a new process, or a restart of `habakkuk serve`). `install SOURCE` takes the sources of
`habakkuk skills install` (a registry name is looked up in the indexes' "plugins"
entries), prints the scan's verdict and every reason before anything is placed, refuses
a dangerous plugin unless `--yes` (never a registry hash mismatch), and installs it
disabled. `update [NAME]` fetches the same source again: unchanged is said so; a changed
plugin is backed up, replaced, and disabled until enabled again. `enable` prints what
the plugin will run and asks y/N on a terminal; `--yes` skips the question (and is
needed for a plugin whose scan was dangerous); without a terminal and without --yes it
refuses.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line, exit_code
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.engine.home import Home
    from habakkuk.knowledge.hub.install import Hub, Outcome
    from habakkuk.knowledge.plugins.manage import Plugins, PluginState
    from habakkuk.knowledge.skills.types import InstallPlan

ACTIONS = ("list", "show", "install", "update", "enable", "disable", "remove")


def add_arguments(command: str, plugins: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk plugins` (entry.py declares the command itself)."""
    actions = plugins.add_subparsers(dest="plugins_command", metavar="ACTION")
    listing = actions.add_parser("list", help="installed plugins and whether they are enabled")
    listing.add_argument("--json", action="store_true")
    enable = actions.add_parser("enable", help="show what a plugin runs, ask, and enable it")
    enable.add_argument("name")
    enable.add_argument("--yes", "-y", action="store_true", help="do not ask")
    for name, about in (
        ("disable", "stop loading a plugin (it stays installed)"),
        ("remove", "remove a plugin (kept in plugins/.backups)"),
    ):
        actions.add_parser(name, help=about).add_argument("name")
    show = actions.add_parser("show", help="what a plugin runs, and its scan")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    install = actions.add_parser(
        "install",
        help="install (disabled) from github:OWNER/REPO[/PATH][@REF], a URL, a path or a NAME",
    )
    install.add_argument("source")
    install.add_argument(
        "--yes", "-y", action="store_true", help="install even when the scan says dangerous"
    )
    install.add_argument("--name", help="pick one of several plugins of the source")
    install.add_argument("--json", action="store_true")
    update = actions.add_parser("update", help="fetch installed plugins' sources again")
    update.add_argument("name", nargs="?", help="one plugin (default: every installed one)")
    update.add_argument(
        "--yes", "-y", action="store_true", help="update even when the scan says dangerous"
    )
    update.add_argument("--json", action="store_true")


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk plugins ACTION` (the exit code)."""
    from habakkuk.engine.errors import NotFound
    from habakkuk.engine.home import Home, check_home_root, default_home
    from habakkuk.knowledge.plugins.manage import Plugins

    action = getattr(args, "plugins_command", None)
    if action not in ACTIONS:
        print("habakkuk: plugins: give an action: " + ", ".join(ACTIONS), file=sys.stderr)
        return EXIT_USAGE
    home = Home(default_home())
    check_home_root(home.root)
    plugins = Plugins(home.root)
    try:
        if action in ("install", "update"):
            import asyncio  # not at module level: `habakkuk --help` builds this parser

            return asyncio.run(_install(home, args) if action == "install" else _update(home, args))
        if action == "list":
            return _list(plugins, args.json)
        if action == "show":
            return _show(plugins.show(args.name), args.json)
        if action == "enable":
            return _enable(plugins, args.name, args.yes)
        if action == "disable":
            plugins.disable(args.name)
            print(t("cli.plugins.disabled", name=args.name))
            return EXIT_OK
        backup = plugins.remove(args.name)
        if backup:
            print(t("cli.plugins.removed_kept", name=args.name, folder=backup.folder))
        else:
            print(t("cli.plugins.removed", name=args.name))
        return EXIT_OK
    except NotFound as exc:  # a plugin the user named
        print(error_line(f"plugins {action}", exc), file=sys.stderr)
        return exit_code(exc)


def _list(plugins: Plugins, as_json: bool) -> int:
    states = plugins.list()
    if as_json:
        print(json.dumps([_json(s) for s in states], indent=2))
        return EXIT_OK
    if not states:
        print(t("cli.plugins.none"))
        return EXIT_OK
    for state in states:
        d = state.description
        about = f"{d.version + ' ' if d and d.version else ''}{d.description if d else ''}"
        print(f"{state.entry.name:<24} {state.status:<9} {state.entry.verdict:<9} {about}")
        if state.problem:
            print("  " + t("cli.plugins.problem", problem=state.problem))
    return EXIT_OK


def _json(state: PluginState) -> dict[str, Any]:
    return {
        "name": state.entry.name,
        "status": state.status,
        "source": state.entry.source,
        "resolved": state.entry.resolved,
        "tree_hash": state.entry.tree_hash,
        "verdict": state.entry.verdict,
        "findings": state.entry.findings,
        "approved": state.entry.approved,
        "enabled": state.entry.enabled,
        "problem": state.problem,
        "runs": state.description.as_json() if state.description else None,
    }


def _findings(state: PluginState) -> list[str]:
    lines = [f"scan: {state.entry.verdict}"]
    for f in state.entry.findings:
        where = f"{f.get('file', '?')}:{f.get('line', 0)}"
        lines.append(f"  {f.get('severity', '?')}: {where}: {f.get('message', '')}")
    return lines


def _show(state: PluginState, as_json: bool) -> int:
    if as_json:
        print(json.dumps(_json(state), indent=2))
        return EXIT_OK
    source = state.entry.source or t("cli.plugins.unknown")
    print(t("cli.plugins.shown", name=state.entry.name, status=state.status, source=source))
    if state.description is not None:
        print("\n".join(state.description.lines()))
    if state.problem:
        print(t("cli.plugins.problem", problem=state.problem))
    print("\n".join(_findings(state)))
    return EXIT_OK


def _enable(plugins: Plugins, name: str, yes: bool) -> int:
    state = plugins.show(name)
    if state.problem:
        print(f"habakkuk: plugins enable: {name}: {state.problem}", file=sys.stderr)
        return EXIT_FAILED
    assert state.description is not None
    print(t("cli.plugins.enabling"))
    print("\n".join(state.description.lines()))
    print("\n".join(_findings(state)))
    if state.entry.verdict == "dangerous" and not yes:
        print(error_line("plugins enable", t("cli.plugins.dangerous", name=name)), file=sys.stderr)
        return EXIT_FAILED
    if not yes:
        if not sys.stdin.isatty():
            print(error_line("plugins enable", t("cli.plugins.no_terminal")), file=sys.stderr)
            return EXIT_USAGE
        answer = input(t("cli.plugins.confirm", name=name) + " [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print(t("cli.plugins.not_enabled"))
            return EXIT_FAILED
    plugins.enable(name, force=yes)
    print(t("cli.plugins.enabled", name=name))
    return EXIT_OK


def _hub(home: Home) -> Hub:
    from habakkuk.engine.config import load_config
    from habakkuk.knowledge.plugins.install import plugin_hub

    registries: dict[str, str] = {}
    # A home without a config can still install from GitHub, a URL or a path.
    if home.config_path.exists():
        registries = dict(load_config(home).skills.registries)
    return plugin_hub(home.root, registries=registries)


def _print_plan(plan: InstallPlan) -> None:
    """The scan's verdict and every reason, before anything is placed."""
    from habakkuk.knowledge.skills.views import plan_lines

    print("\n".join(plan_lines(plan)))


def _done(outcome: Outcome) -> None:
    name = outcome.name
    if outcome.status == "unchanged":
        print(t("cli.plugins.unchanged", name=name))
        return
    if outcome.status == "updated":
        changed, removed = len(outcome.changed), len(outcome.removed)
        updated = t("cli.plugins.updated", changed=changed, removed=removed)
        print(t("cli.plugins.updated_line", name=name, updated=updated, backup=outcome.backup))
        print("  " + t("cli.plugins.disabled_until", name=name))
        return
    placed = t("cli.plugins.placed", name=name, status=outcome.status, folder=outcome.folder)
    if outcome.backup:
        placed += t("cli.plugins.old_version", backup=outcome.backup)
    print(placed)
    print("  " + t("cli.plugins.runs_nothing", name=name))


def _dump(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


async def _install(home: Home, args: argparse.Namespace) -> int:
    from habakkuk.knowledge.plugins.install import install
    from habakkuk.knowledge.skills import views

    plans: list[InstallPlan] = []

    def on_plan(plan: InstallPlan) -> None:
        plans.append(plan)
        if not args.json:
            _print_plan(plan)

    try:
        outcomes = await install(
            _hub(home), args.source, name=args.name, yes=args.yes, on_plan=on_plan
        )
    except BaseException:
        if args.json and plans:
            _dump({"installed": [], "plans": [views.plan_json(p) for p in plans]})
        raise
    if args.json:
        _dump({"installed": [views.outcome_json(o) for o in outcomes]})
    else:
        for outcome in outcomes:
            _done(outcome)
    return EXIT_OK


async def _update(home: Home, args: argparse.Namespace) -> int:
    from habakkuk.knowledge.plugins.install import update
    from habakkuk.knowledge.skills import views

    failed: list[str] = []

    def on_plan(plan: InstallPlan) -> None:
        if not args.json:
            _print_plan(plan)

    def on_error(name: str, exc: HabakkukError) -> None:
        failed.append(name)
        print(f"habakkuk: plugins update: {name}: {exc}", file=sys.stderr)

    outcomes = await update(_hub(home), args.name, yes=args.yes, on_plan=on_plan, on_error=on_error)
    if args.json:
        _dump({"updated": [views.outcome_json(o) for o in outcomes], "failed": failed})
    else:
        for outcome in outcomes:
            _done(outcome)
        if not outcomes and not failed:
            print("no plugins installed from a source", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
