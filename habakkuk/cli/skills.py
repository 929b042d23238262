"""`habakkuk skills list|show|install|update|remove|restore|approve`.

The parser is declared with the standard library only (habakkuk/cli/entry.py builds it).
install and update work on the files (knowledge/hub/install.py) and need no runtime:
they print each skill's scan verdict and every reason before anything is placed, and
what to run next. The other actions go through the skills service (SkillsAccess), the
same one the tools, chats and HTTP API use. `--json` prints the shapes of
habakkuk.knowledge.skills.views. A user error is one line on stderr and an exit code
from engine/exit_codes.py.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line, exit_code

if TYPE_CHECKING:
    from habakkuk.knowledge.hub.install import Hub, Outcome
    from habakkuk.knowledge.skills.types import InstallPlan, SkillsAccess, SkillSummary

ACTIONS = ("list", "show", "install", "update", "remove", "restore", "approve", "curate")


def add_arguments(command: str, skills: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk skills` (entry.py declares the command itself)."""
    actions = skills.add_subparsers(dest="skills_command", metavar="ACTION")

    def action(name: str, about: str, *, agent: bool = True) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=about)
        if agent:
            parser.add_argument("--agent", help="agent name (default: the first agent)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        return parser

    action("list", "the agent's own skills and the shared ones")
    show = action("show", "one skill: its source, trust, scan verdict and instructions")
    show.add_argument("name")
    install = action(
        "install",
        "install from github:OWNER/REPO[/PATH][@REF], a URL, a path or a registry NAME",
        agent=False,
    )
    install.add_argument("source")
    install.add_argument(
        "-y", "--yes", action="store_true", help="install even when the scan says dangerous"
    )
    install.add_argument("--name", help="install under this name (or pick one of several)")
    update = action("update", "fetch installed skills' sources again", agent=False)
    update.add_argument("name", nargs="?", help="one skill (default: every installed one)")
    update.add_argument(
        "-y", "--yes", action="store_true", help="update even when the scan says dangerous"
    )
    remove = action("remove", "remove a skill (kept in skills/.backups; restore puts it back)")
    remove.add_argument("name")
    restore = action("restore", "put back the newest backup of a skill")
    restore.add_argument("name")
    approve = action("approve", "trust an installed skill", agent=False)
    approve.add_argument("name")
    approve.add_argument(
        "--yes-i-read-it",
        action="store_true",
        help="approve a skill whose scan said dangerous, after reading every finding",
    )
    curate = action(
        "curate", "merge near-duplicate own skills, archive unused ones (backed up)", agent=False
    )
    curate.add_argument(
        "--dry-run", action="store_true", help="say what it would change; change nothing"
    )


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk skills ACTION` (the exit code)."""
    if args.skills_command not in ACTIONS:
        print("habakkuk: skills: give an action: " + ", ".join(ACTIONS), file=sys.stderr)
        return EXIT_USAGE
    import asyncio  # not at module level: `habakkuk --help` builds this parser

    return asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    from habakkuk.engine.errors import NotFound

    action = args.skills_command
    try:
        if action == "install":
            return await _install(args)
        if action == "update":
            return await _update(args)
        return await _with_runtime(args)
    except NotFound as exc:  # a skill, registry name or agent the user named
        print(error_line(f"skills {action}", exc), file=sys.stderr)
        return exit_code(exc)


def _hub() -> Hub:
    from habakkuk.engine.config import load_config
    from habakkuk.engine.home import Home, default_home
    from habakkuk.knowledge.hub.install import Hub

    home = Home(default_home())
    registries: dict[str, str] = {}
    # A home without a config can still install from GitHub, a URL or a path.
    if home.config_path.exists():
        registries = dict(load_config(home).skills.registries)
    return Hub(home.root, registries=registries)


def _out(data: Any) -> None:
    import json

    print(json.dumps(data, ensure_ascii=False, indent=2))


def print_plan(plan: InstallPlan) -> None:
    """The scan's verdict and every reason, before anything is placed."""
    from habakkuk.knowledge.skills.views import plan_lines

    print("\n".join(plan_lines(plan)))


def _done(outcome: Outcome) -> None:
    if outcome.status == "unchanged":
        print(f"{outcome.name}: unchanged")
        return
    if outcome.status == "updated":
        print(
            f"{outcome.name}: updated ({len(outcome.changed)} file(s) changed, "
            f"{len(outcome.removed)} removed; the old version is in skills/{outcome.backup})"
        )
        print(f"  it must be approved again: habakkuk skills approve {outcome.name}")
        return
    kept = f"; the old version is in skills/{outcome.backup}" if outcome.backup else ""
    print(f"{outcome.name}: {outcome.status} into {outcome.folder}{kept}")
    print(
        f"  untrusted until approved: read it (habakkuk skills show {outcome.name}), "
        f"then run habakkuk skills approve {outcome.name}"
    )


async def _install(args: argparse.Namespace) -> int:
    from habakkuk.knowledge.skills import views

    hub = _hub()
    plans: list[InstallPlan] = []

    def on_plan(plan: InstallPlan) -> None:
        plans.append(plan)
        if not args.json:
            print_plan(plan)

    try:
        outcomes = await hub.install(args.source, name=args.name, yes=args.yes, on_plan=on_plan)
    except BaseException:
        if args.json and plans:
            _out({"installed": [], "plans": [views.plan_json(p) for p in plans]})
        raise
    if args.json:
        _out({"installed": [views.outcome_json(o) for o in outcomes]})
    else:
        for outcome in outcomes:
            _done(outcome)
    return EXIT_OK


async def _update(args: argparse.Namespace) -> int:
    from habakkuk.engine.errors import HabakkukError
    from habakkuk.knowledge.skills import views

    hub = _hub()
    failed: list[str] = []

    def on_plan(plan: InstallPlan) -> None:
        if not args.json:
            print_plan(plan)

    def on_error(name: str, exc: HabakkukError) -> None:
        failed.append(name)
        print(f"habakkuk: skills update: {name}: {exc}", file=sys.stderr)

    outcomes = await hub.update(args.name, yes=args.yes, on_plan=on_plan, on_error=on_error)
    if args.json:
        _out({"updated": [views.outcome_json(o) for o in outcomes], "failed": failed})
    else:
        for outcome in outcomes:
            _done(outcome)
        if not outcomes and not failed:
            print("no skills installed from a source", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


async def _with_runtime(args: argparse.Namespace) -> int:
    from habakkuk.runtime import Runtime

    runtime = await Runtime.open()
    try:
        if args.skills_command == "curate":
            from habakkuk.knowledge.skills.curator import curate_command

            return await curate_command(
                args, home=runtime.home, config=runtime.config, memory=runtime.memory
            )
        agent = runtime.config.agent(getattr(args, "agent", None)).name
        return await _act(runtime.skills, agent, args)
    finally:
        await runtime.close()


def _line(skill: SkillSummary) -> str:
    trust = "trusted" if skill.trusted else "untrusted"
    verdict = f", scan {skill.verdict}" if skill.verdict else ""
    used = f", used {skill.last_used}" if skill.last_used else ""
    return f"{skill.name:<28} {skill.scope:<6} {trust}{verdict}{used}  {skill.description}"


async def _act(skills: SkillsAccess, agent: str, args: argparse.Namespace) -> int:
    from habakkuk.knowledge.skills import views

    action = args.skills_command
    if action == "list":
        found = await skills.list_skills(agent)
        if args.json:
            _out(views.skills_json(found))
        else:
            for skill in found:
                print(_line(skill))
            print(f"{len(found)} skill(s)", file=sys.stderr)
        return EXIT_OK
    if action == "show":
        one = await skills.skill(agent, args.name)
        if args.json:
            _out(views.skill_json(one))
            return EXIT_OK
        print(_line(one.summary))
        print(f"source: {one.summary.source}")
        if one.summary.warning:
            print(f"warning: {one.summary.warning}")
        if one.files:
            print("files: " + ", ".join(one.files))
        for line in views.findings_lines(one.summary):
            print(line)
        if one.caution:
            print(f"\n{one.caution}")
        print()
        print(one.body)
        return EXIT_OK
    if action == "remove":
        removed = await skills.remove(agent, args.name)
        if args.json:
            _out(views.removed_json(removed))
        else:
            print(
                f"removed {removed.name} (kept in skills/.backups/{removed.backup}; "
                f"habakkuk skills restore {removed.name} puts it back)"
            )
        return EXIT_OK
    if action == "restore":
        restored = await skills.restore(agent, args.name)
        if args.json:
            _out(views.summary_json(restored))
        else:
            print(f"restored {restored.name} ({restored.scope})")
        return EXIT_OK
    return await _approve(skills, args)


async def _approve(skills: SkillsAccess, args: argparse.Namespace) -> int:
    """`skills approve NAME [--yes-i-read-it]`: the service decides what needs the flag;
    a dangerous skill's findings are printed whether or not it is given."""
    from habakkuk.knowledge.skills import views
    from habakkuk.knowledge.skills.types import NeedsAcknowledgement

    try:
        approved = await skills.approve(args.name, acknowledged=args.yes_i_read_it)
    except NeedsAcknowledgement as exc:
        if args.json:
            _out(views.summary_json(exc.skill))
        else:
            print("\n".join(views.findings_lines(exc.skill)))
        print(
            f"habakkuk: skills approve: {exc.skill.name}: the scan found it dangerous; "
            "nothing changed. Read every finding above, then repeat with --yes-i-read-it "
            "only if you trust it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.json:
        _out(views.summary_json(approved))
        return EXIT_OK
    if approved.verdict == "dangerous":
        print("\n".join(views.findings_lines(approved)))
    print(f"approved {approved.name}: its instructions now load without the caution")
    return EXIT_OK
