"""The skills curator: keeps each agent's own skills tidy without losing anything
(spec 000 "Skills" -> "Curator").

`curate` looks only at agents' own skills (HOME/agents/<agent>/skills/<name>/), never at
shared or plugin skills, and never at a skill whose frontmatter says `pinned: true`
(neither as the keeper of a merge nor as the one merged away). What it decides is in
curator_rules.py; here it is applied:

- A merge keeps the more recently used skill's SKILL.md (frontmatter and instructions as
  they were) and appends the other's instructions under `## Merged from <name>`; the
  other's supporting files are copied into merged/<name>/ of the keeper, then the other
  folder is removed.
- An archive moves a skill not loaded for `skills.archive_after_days` out of the skills
  folder. Stale skills are archived before merges are planned, so unused instructions are
  never folded into a live skill (the stale one stays restorable whole). A skill moved
  away loses its stamp in skills/.usage.json, so one put back by restore counts from the
  restore and is not archived again at the next run.

Nothing is deleted without a backup: before a change, the folders it touches go to
HOME/skills/.backups (knowledge/hub/backups.py: the keeper's previous version as
"replaced", the one merged away as "merged", an archived one as "archived"), so
`habakkuk skills restore NAME` puts any of them back. The order makes a failure harmless:
back up first, then copy the merged files beside the keeper (removed again if what
follows fails), then write the keeper's SKILL.md atomically (the commit point), and only
then remove the other folder, by renaming it to a hidden name discovery skips before
deleting it. A change that fails is logged and reported; the others go on.

Each change is recorded in that agent's memory history (kind "skill", by "curator") when
a memory service is given, and skills/.curator.json records the last run (when, what
changed) atomically; `due` reads it: `skills.curate` daily, weekly or monthly is due when
the last run is older than 1, 7 or 30 days; off is never due by itself.
`habakkuk skills curate [--dry-run] [--json]` runs it by hand (force): `format_run` is its
text, `run_json` its JSON, and a dry run touches nothing on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.knowledge.frontmatter import rfc3339
from habakkuk.knowledge.hub.backups import BACKUPS_DIR, back_up
from habakkuk.knowledge.memory_types import ChangeRecorder, Provenance
from habakkuk.knowledge.notes import write_atomic

from .curator_rules import Duplicate, parse_time, plan_merges, stale
from .discovery import Discovery, Root, parse_skill_md, read_regular, supporting_files
from .types import SKILL_FILE, CuratorChange, CuratorRun, Skill, SkillSummary
from .usage import UsageLog, usage_key

if TYPE_CHECKING:
    import argparse

log = logging.getLogger(__name__)

CURATOR_FILE = ".curator.json"
LOCK_FILE = ".curator.lock"
MERGED_DIR = "merged"
# Supporting files a merge copies at most (discovery lists 200 for a prompt; a merge
# must not leave any behind, so a skill with more is not merged: see _merge).
FILES_MAX = 10_000
PERIOD_DAYS = {"daily": 1.0, "weekly": 7.0, "monthly": 30.0}


@dataclass(frozen=True)
class _Recorded:
    """A SKILL.md's change for the memory history, collected off the event loop."""

    agent: str
    name: str
    before: str | None
    after: str | None
    note: str


# -- when it is due ---------------------------------------------------------------------


def curator_path(home: Home) -> Path:
    """HOME/skills/.curator.json."""
    return home.root / "skills" / CURATOR_FILE


def last_run(home: Home) -> dt.datetime | None:
    """When the last (real, not dry) run was, from .curator.json; None when never or
    unreadable (an unreadable file counts as never, so the curator runs and rewrites it)."""
    try:
        data = json.loads(curator_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return parse_time(data.get("at")) if isinstance(data, dict) else None


def is_due(config: Config, last: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether `skills.curate` asks for a run now, given the last run."""
    period = PERIOD_DAYS.get(config.skills.curate)
    if period is None:  # off
        return False
    return last is None or now - last >= dt.timedelta(days=period)


# -- the pass ---------------------------------------------------------------------------


async def curate(
    home: Home,
    config: Config,
    *,
    dry_run: bool = False,
    now: dt.datetime | None = None,
    force: bool = False,
    memory: ChangeRecorder | None = None,
) -> CuratorRun:
    """One curator pass over every configured agent's own skills, when due (or `force`).

    Not due and not forced: nothing happens (`ran` False). The file work runs in a
    thread; the memory history is written afterwards, one change at a time."""
    when = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    stamp = rfc3339(when)
    if not force and not is_due(config, await asyncio.to_thread(last_run, home), when):
        return CuratorRun(dry_run=dry_run, at=stamp, due=False, ran=False)
    agents = sorted(config.agents)
    run, recorded = await asyncio.to_thread(
        _curate_files, home, config, agents, when, dry_run, not force
    )
    if memory is not None:
        for item in recorded:
            try:
                await memory.record_change(
                    item.agent,
                    "skill",
                    item.name,
                    f"skills/{item.name}/{SKILL_FILE}",
                    item.before,
                    item.after,
                    Provenance(by="curator", tool="curator", note=item.note),
                )
            except Exception:  # the change is made and backed up; the history is a record
                log.exception(
                    "curator: recording %s/%s in the history failed", item.agent, item.name
                )
    return run


def _curate_files(
    home: Home, config: Config, agents: list[str], now: dt.datetime, dry_run: bool, due: bool
) -> tuple[CuratorRun, list[_Recorded]]:
    stamp = rfc3339(now)
    changes: list[CuratorChange] = []
    recorded: list[_Recorded] = []
    errors: list[str] = []
    with _exclusive(home, dry_run):
        for agent in agents:
            skills = own_skills(home, agent)
            days = config.skills.archive_after_days
            archived = {s.name for s in stale([s.summary for s in skills], now, days)}
            for skill in skills:
                if skill.name not in archived:
                    continue
                try:
                    changes.append(_archive(home, agent, skill, days, dry_run, recorded))
                except (OSError, HabakkukError) as exc:
                    errors.append(f"archiving {agent}/{skill.name}: {exc}")
            for merge in plan_merges(s for s in skills if s.name not in archived):
                try:
                    changes.append(_merge(home, agent, merge, dry_run, recorded))
                except (OSError, HabakkukError) as exc:
                    errors.append(f"merging {agent}/{merge.merged.name}: {exc}")
        run = CuratorRun(tuple(changes), dry_run=dry_run, at=stamp, due=due, errors=tuple(errors))
        if not dry_run:
            write_atomic(curator_path(home), json.dumps(run_json(run), indent=2) + "\n")
    for error in errors:
        log.warning("curator: %s", error)
    return run, recorded


@contextlib.contextmanager
def _exclusive(home: Home, dry_run: bool) -> Iterator[None]:
    """One curator at a time per home (`serve` and the CLI may both run it)."""
    if dry_run:
        yield
        return
    folder = home.root / "skills"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(folder / LOCK_FILE, "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HabakkukError(
                f"{folder / LOCK_FILE}: another curator run is in progress; try again later"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _backups_root(home: Home) -> Path:
    return home.root / "skills"


def _folder(home: Home, agent: str, name: str) -> Path:
    return home.agent_dir(agent) / "skills" / name


def _relative_backup(home: Home, folder: Path) -> str:
    return str(folder.relative_to(_backups_root(home) / BACKUPS_DIR))


def _archive(
    home: Home, agent: str, skill: Skill, days: float, dry_run: bool, recorded: list[_Recorded]
) -> CuratorChange:
    summary = skill.summary
    if summary.last_used:
        reason = f"not loaded since {summary.last_used} (over {days:g} days)"
    else:
        reason = f"never loaded; unchanged since {summary.updated} (over {days:g} days)"
    change = CuratorChange("archive", agent, skill.name, reason=reason)
    if dry_run:
        return change
    folder = _folder(home, agent, skill.name)
    before = (folder / SKILL_FILE).read_text(encoding="utf-8")
    backup = back_up(_backups_root(home), home.root, folder, "archived")
    _remove(folder)
    _forget_usage(home, agent, skill.name)
    recorded.append(_Recorded(agent, skill.name, before, None, f"archived: {reason}"))
    log.info("curator: archived %s/%s (%s)", agent, skill.name, reason)
    return replace(change, backup=_relative_backup(home, backup.folder))


def _merge(
    home: Home, agent: str, merge: Duplicate, dry_run: bool, recorded: list[_Recorded]
) -> CuratorChange:
    keeper, merged = merge.keeper.name, merge.merged.name
    change = CuratorChange("merge", agent, merged, into=keeper, reason=merge.rule)
    if dry_run:
        return change
    if len(merge.merged.files) >= FILES_MAX:
        raise HabakkukError(f"{merged} has {FILES_MAX} or more files; merge it by hand")
    keep_dir, other_dir = _folder(home, agent, keeper), _folder(home, agent, merged)
    before = (keep_dir / SKILL_FILE).read_text(encoding="utf-8")
    other_text = (other_dir / SKILL_FILE).read_text(encoding="utf-8")
    root = _backups_root(home)
    back_up(root, home.root, keep_dir, "replaced")
    backup = back_up(root, home.root, other_dir, "merged")
    copied = _copy_supporting(other_dir, merge.merged.files, keep_dir / MERGED_DIR, merged)
    after = merged_text(before, merge.merged, copied)
    try:
        write_atomic(keep_dir / SKILL_FILE, after)
    except BaseException:
        if copied is not None:
            shutil.rmtree(keep_dir / MERGED_DIR / copied, ignore_errors=True)
        raise
    _remove(other_dir)
    _forget_usage(home, agent, merged)
    note = f"merged {merged} into {keeper} ({merge.rule})"
    recorded.append(_Recorded(agent, keeper, before, after, note))
    recorded.append(_Recorded(agent, merged, other_text, None, note))
    log.info("curator: %s/%s", agent, note)
    return replace(change, backup=_relative_backup(home, backup.folder))


def merged_text(keeper_text: str, merged: Skill, files_dir: str | None) -> str:
    """The keeper's SKILL.md with the other's instructions appended under a heading
    (and where its supporting files went)."""
    parts = [keeper_text.rstrip("\n"), "", f"## Merged from {merged.name}", ""]
    if merged.summary.description:
        parts += [f"_{merged.summary.description}_", ""]
    parts.append(merged.body.strip("\n"))
    if files_dir is not None:
        parts += ["", f"Its supporting files are in {MERGED_DIR}/{files_dir}/."]
    return "\n".join(parts) + "\n"


def _copy_supporting(
    source: Path, files: tuple[str, ...], target_root: Path, name: str
) -> str | None:
    """Copy a skill's supporting files into `target_root`/<name>/ (or <name>-2/, ... when
    taken), staged under a hidden name and renamed into place; the folder's name, or None
    when there was nothing to copy. Symlinks are refused, never followed."""
    if not files:
        return None
    target_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    chosen, n = name, 1
    while (target_root / chosen).exists():
        n += 1
        chosen = f"{name}-{n}"
    staging = target_root / f".{chosen}.{secrets.token_hex(4)}.tmp"
    try:
        for relative in files:
            origin = source / relative
            if origin.is_symlink() or not origin.resolve().is_relative_to(source.resolve()):
                raise HabakkukError(f"{origin}: is a symbolic link or outside the skill")
            copy = staging / relative
            copy.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copyfile(origin, copy, follow_symlinks=False)
        os.replace(staging, target_root / chosen)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return chosen


def _remove(folder: Path) -> None:
    """Remove a (backed-up) skill folder: first renamed to a hidden name, which discovery
    skips, so a failure half-way never leaves a half-deleted skill in the list."""
    gone = folder.with_name(f".{folder.name}.{secrets.token_hex(4)}.removing")
    os.replace(folder, gone)
    shutil.rmtree(gone)


# -- reading the own skills -------------------------------------------------------------


def _forget_usage(home: Home, agent: str, name: str) -> None:
    """Drop the last-use stamp of a skill the curator moved away: one put back by
    `restore` then counts from its restore (its last change), not from a use long ago
    that would archive it again at the next run."""
    UsageLog(home.root / "skills").forget(usage_key(agent, "own", name))


def own_skills(home: Home, agent: str) -> list[Skill]:
    """The agent's own skills as discovery finds them, with their bodies, supporting
    files and last use (blocking: the curator runs it in a thread)."""
    found, _ = Discovery().scan([Root(home.agent_dir(agent) / "skills", "own")])
    used = UsageLog(home.root / "skills").read()
    skills: list[Skill] = []
    for item in sorted(found.values(), key=lambda f: f.name):
        try:
            parsed = parse_skill_md(read_regular(item.folder / SKILL_FILE), item.name)
        except (OSError, UnicodeDecodeError):
            continue  # changed or gone since discovery saw it: left for the next run
        if isinstance(parsed, str):
            continue
        summary = SkillSummary(
            name=item.name,
            description=item.description,
            scope="own",
            source="own",
            trusted=True,
            last_used=used.get(usage_key(agent, "own", item.name)),
            updated=item.updated,
            pinned=item.pinned,
        )
        files = supporting_files(item.folder, limit=FILES_MAX)
        skills.append(Skill(summary, parsed.body, files))
    return skills


# -- what the CLI prints ----------------------------------------------------------------


def change_json(change: CuratorChange) -> dict[str, Any]:
    """One change as JSON (the shape of .curator.json and `skills curate --json`)."""
    return {
        "action": change.action,
        "agent": change.agent,
        "name": change.name,
        "into": change.into,
        "reason": change.reason,
        "backup": change.backup,
    }


def run_json(run: CuratorRun) -> dict[str, Any]:
    """A run as JSON: {"at", "dry_run", "due", "ran", "changes": [...], "errors": [...]}."""
    return {
        "at": run.at,
        "dry_run": run.dry_run,
        "due": run.due,
        "ran": run.ran,
        "changes": [change_json(c) for c in run.changes],
        "errors": list(run.errors),
    }


def format_run(run: CuratorRun) -> str:
    """A run as text, one line per change, for `habakkuk skills curate`."""
    if not run.ran:
        return "The curator is not due (skills.curate); nothing done."
    verb = "would " if run.dry_run else ""
    lines = []
    for c in run.changes:
        if c.action == "merge":
            line = f"{verb}merge {c.agent}/{c.name} into {c.into} ({c.reason})"
        else:
            line = f"{verb}archive {c.agent}/{c.name}: {c.reason}"
        if c.backup:
            line += f"; backup: skills/{BACKUPS_DIR}/{c.backup}"
        lines.append(line)
    lines += [f"failed: {error}" for error in run.errors]
    if not run.changes and not run.errors:
        lines.append("Nothing to tidy: no near-duplicate or stale own skills.")
    elif run.changes and not run.dry_run:
        lines.append("`habakkuk skills restore NAME` undoes any of these.")
    elif run.dry_run:
        lines.append("Dry run: nothing was changed.")
    return "\n".join(lines)


async def curate_command(
    args: argparse.Namespace,
    *,
    home: Home,
    config: Config,
    memory: ChangeRecorder | None = None,
    out: Callable[[str], object] = print,
) -> int:
    """`habakkuk skills curate [--dry-run] [--json]`: run the curator now (whether due or
    not) and print what it did; 0, or 1 when a change failed."""
    run = await curate(home, config, dry_run=bool(args.dry_run), force=True, memory=memory)
    if getattr(args, "json", False):
        out(json.dumps(run_json(run), ensure_ascii=False, indent=2))
    else:
        out(format_run(run))
    return 1 if run.errors else 0
