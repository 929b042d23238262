"""Installing and updating skills (and, through the same code, plugins).

install: fetch the source into HOME/skills/.staging/<random>/ (sources.py, unpack.py) →
refuse it outright when a registry entry pins a tree hash the download does not have
(--yes does not change that) → find what it holds: the folder itself when it has
SKILL.md, else every folder beneath it (three levels down) that has one, each
installed under its own name (`--name N` picks one of several, or renames a lone one)
→ per skill: the tree hash, the scan, an InstallPlan shown to the user (`on_plan`)
before anything is placed → refuse all of it when any is dangerous, unless `yes` →
move each into HOME/skills/<name>/ (a rename within the same file system; a skill
installed before goes to skills/.backups first; a hand-made folder of that name is
never replaced) → record it in skills/.lock.json, unapproved (installed skills are
untrusted until `habakkuk skills approve NAME`).

update: for each lock entry (or the one named), fetch the same source again (the same
ref, which for a branch may have moved; a registry name is looked up again) and take
the same folder of it. The same tree hash: unchanged, nothing is touched. Otherwise the
scan runs again, its plan is shown, dangerous is refused unless `yes`, the installed
version is backed up (skills/.backups/<name>/...-updated) and only the files that
differ are replaced (added, rewritten or deleted one by one, each rewrite atomic);
the lock records the new commit and hash. A changed skill must be approved again: its
approval is cleared, because what was approved is no longer what is there.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.knowledge.frontmatter import Frontmatter, FrontmatterError, now, read_frontmatter
from habakkuk.knowledge.hub.backups import back_up
from habakkuk.knowledge.hub.download import Http
from habakkuk.knowledge.hub.lock import LockEntry, held, read_lock, write_lock
from habakkuk.knowledge.hub.sources import Fetched, Section, Source, fetch, parse_source
from habakkuk.knowledge.hub.treehash import TreeEntry, hash_entries, same_hash, tree_entries
from habakkuk.knowledge.hub.unpack import DIR_MODE, Limits
from habakkuk.knowledge.skills.types import SKILL_FILE, SKILL_NAME, InstallPlan, ScanReport

STAGING_DIR = ".staging"
SEARCH_DEPTH = 3  # how far beneath a source's root its skills are looked for

Scan = Callable[[Path], ScanReport]


class PinMismatch(HabakkukError):
    """A registry entry pins a tree hash the download does not have: always refused."""


class ScanBlocked(HabakkukError):
    """The scan found something dangerous and the user did not say --yes."""


def _no_warning(folder: Path) -> str:
    return ""


@dataclass(frozen=True)
class Kind:
    """What a hub installs: skills (SKILL.md) or plugins (habakkuk-plugin.yaml)."""

    folder: str  # under the home: "skills" or "plugins"
    marker: str  # the file that makes a folder one
    section: Section  # in a registry index
    label: str  # "skill" or "plugin", for messages
    # The name the marker declares (None when it declares none) and a problem that
    # stops the install (None when fine).
    declared_name: Callable[[Path], str | None]
    problem: Callable[[Path], str | None]
    # What the install shows but lets through (a frontmatter read leniently), or "".
    warning: Callable[[Path], str] = _no_warning


def _frontmatter(folder: Path) -> Frontmatter | None:
    """SKILL.md's frontmatter, read as discovery reads it (FrontmatterError when not even
    the lenient reader can)."""
    return read_frontmatter((folder / SKILL_FILE).read_text(encoding="utf-8", errors="replace"))


def _skill_name(folder: Path) -> str | None:
    try:
        found = _frontmatter(folder)
    except FrontmatterError:
        return None  # _skill_problem refuses it
    name = found.meta.get("name") if found is not None else None
    return name.strip() if isinstance(name, str) and name.strip() else None


def _skill_problem(folder: Path) -> str | None:
    try:
        found = _frontmatter(folder)
    except FrontmatterError as exc:
        return f"{SKILL_FILE}'s frontmatter cannot be read: {exc}"
    description = found.meta.get("description") if found is not None else None
    if not isinstance(description, str) or not description.strip():
        return f"{SKILL_FILE} needs frontmatter with a name and a description"
    return None


def _skill_warning(folder: Path) -> str:
    try:
        found = _frontmatter(folder)
    except FrontmatterError:
        return ""
    return f"{SKILL_FILE} {found.warning}" if found is not None and found.warning else ""


SKILLS = Kind("skills", SKILL_FILE, "skills", "skill", _skill_name, _skill_problem, _skill_warning)


@dataclass
class Candidate:
    """One skill (or plugin) of a staged source, ready to be placed."""

    name: str
    folder: Path  # in the staging folder
    subpath: str  # relative to the source's root
    entries: list[TreeEntry]
    plan: InstallPlan


@dataclass
class Staged:
    """A fetched source and what it holds; `cleanup()` removes the staging folder."""

    source: Source  # as the user named it (a registry name stays one)
    fetched: Fetched
    staging: Path
    candidates: list[Candidate] = field(default_factory=list)

    def cleanup(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


@dataclass(frozen=True)
class Outcome:
    """What install or update did with one skill."""

    name: str
    status: Literal["installed", "replaced", "updated", "unchanged"]
    plan: InstallPlan | None = None
    folder: Path | None = None
    changed: tuple[str, ...] = ()  # update: files added or rewritten
    removed: tuple[str, ...] = ()  # update: files deleted
    backup: str = ""  # the backup folder of the version replaced


def default_scan(folder: Path) -> ScanReport:
    """The scan of habakkuk.knowledge.scan (imported when first used)."""
    from habakkuk.knowledge.scan import scan_folder

    return scan_folder(folder)


def find_candidates(root: Path, marker: str, depth: int = SEARCH_DEPTH) -> list[Path]:
    """`root` when it has `marker`, else the folders beneath it (to `depth` levels) that
    do, not looking inside one that does; sorted."""
    if (root / marker).is_file():
        return [root]
    found: list[Path] = []

    def walk(folder: Path, level: int) -> None:
        if level > depth:
            return
        for child in sorted(folder.iterdir()):
            if child.name.startswith(".") or not child.is_dir() or child.is_symlink():
                continue
            if (child / marker).is_file():
                found.append(child)
            else:
                walk(child, level + 1)

    walk(root, 1)
    return found


class Hub:
    """Installs into HOME/<kind.folder>/ and keeps its lock file and backups."""

    def __init__(
        self,
        home: Path,
        *,
        registries: Mapping[str, str] | None = None,
        kind: Kind = SKILLS,
        scan: Scan | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.home = home
        self.kind = kind
        self.root = home / kind.folder
        self.registries = dict(registries or {})
        self.scan = scan or default_scan
        self.limits = limits or Limits()

    # -- staging -----------------------------------------------------------------------

    def _new_staging(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        base = self.root / STAGING_DIR
        base.mkdir(exist_ok=True, mode=DIR_MODE)
        folder = base / secrets.token_hex(8)
        folder.mkdir(mode=DIR_MODE)
        return folder

    async def stage(self, http: Http, text: str, *, name: str | None = None) -> Staged:
        """Fetch, check the pin, find, hash and scan (nothing is placed). The caller
        calls `cleanup()` on the result; on an error the staging folder is removed here."""
        source = parse_source(text, self.registries)
        staging = self._new_staging()
        try:
            staged = await self._fetch(http, source, staging)
            fetched = staged.fetched
            folders = find_candidates(fetched.root, self.kind.marker)
            if not folders:
                raise HabakkukError(
                    f"{source.text}: holds no {self.kind.label} (no folder with {self.kind.marker})"
                )
            named = self._names(source, fetched.root, folders, name)
            for cand_name, folder in named:
                staged.candidates.append(await self._candidate(staged, cand_name, folder))
            return staged
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    async def _fetch(self, http: Http, source: Source, staging: Path) -> Staged:
        """Download `source` into `staging` and check a registry's pinned hash."""
        fetched = await fetch(
            source,
            staging,
            http=http,
            registries=self.registries,
            limits=self.limits,
            section=self.kind.section,
        )
        self._check_pin(fetched, source)
        return Staged(source, fetched, staging)

    def _check_pin(self, fetched: Fetched, source: Source) -> None:
        if not fetched.pinned:
            return
        got = hash_entries(tree_entries(fetched.root))
        if not same_hash(fetched.pinned, got):
            raise PinMismatch(
                f"{source.text}: the registry {fetched.registry} pins {fetched.pinned} but the "
                f"download hashes to {got}; refused (--yes does not override a hash mismatch)"
            )

    def _names(
        self, source: Source, root: Path, folders: list[Path], wanted: str | None
    ) -> list[tuple[str, Path]]:
        label = self.kind.label
        if len(folders) == 1:
            folder = folders[0]
            fallback = source.default_name() if folder == root else folder.name
            chosen = wanted or self.kind.declared_name(folder) or fallback
            self._check_name(chosen, source)
            return [(chosen, folder)]
        named: dict[str, Path] = {}
        for folder in folders:
            own = self.kind.declared_name(folder) or folder.name
            if own in named:
                raise HabakkukError(
                    f"{source.text}: two {label}s are called {own!r} "
                    f"({named[own].relative_to(root)}, {folder.relative_to(root)})"
                )
            named[own] = folder
        if wanted:
            if wanted not in named:
                raise NotFound(
                    f"{source.text}: no {label} {wanted!r} in it ({', '.join(sorted(named))})"
                )
            named = {wanted: named[wanted]}
        for own in named:
            self._check_name(own, source)
        return sorted(named.items())

    def _check_name(self, name: str, source: Source) -> None:
        if not SKILL_NAME.fullmatch(name):
            raise HabakkukError(
                f"{source.text}: {name!r} is not a {self.kind.label} name (lower-case letters, "
                "digits and dashes, at most 64); give one with --name"
            )

    async def _candidate(self, staged: Staged, name: str, folder: Path) -> Candidate:
        problem = self.kind.problem(folder)
        if problem:
            raise HabakkukError(f"{staged.source.text}: {name}: {problem}")
        entries = tree_entries(folder)
        report = await asyncio.to_thread(self.scan, folder)
        lock, _ = read_lock(self.root)
        plan = InstallPlan(
            name=name,
            source=staged.source.text,
            resolved=staged.fetched.resolved,
            tree_hash=hash_entries(entries),
            report=report,
            files=tuple(e.path for e in entries),
            replaces=(self.root / name).exists() or name in lock,
            warnings=tuple(w for w in (self.kind.warning(folder),) if w),
        )
        subpath = (
            ""
            if folder == staged.fetched.root
            else str(folder.relative_to(staged.fetched.root).as_posix())
        )
        return Candidate(name, folder, subpath, entries, plan)

    # -- placing -----------------------------------------------------------------------

    def _refuse_dangerous(self, plans: list[InstallPlan], yes: bool) -> None:
        bad = [p.name for p in plans if p.report.verdict == "dangerous"]
        if bad and not yes:
            raise ScanBlocked(
                f"{', '.join(bad)}: the scan found {'it' if len(bad) == 1 else 'them'} "
                "dangerous; nothing was installed (read the reasons above; --yes installs "
                "anyway)"
            )

    def place(self, staged: Staged, *, yes: bool = False) -> list[Outcome]:
        """Move every candidate into place and record it, after the dangerous check."""
        self._refuse_dangerous([c.plan for c in staged.candidates], yes)
        with held(self.root):
            return self._place_all(staged)

    def _place_all(self, staged: Staged) -> list[Outcome]:
        lock, problem = read_lock(self.root)
        if problem:
            raise HabakkukError(f"{problem}; fix or remove it before installing")
        for cand in staged.candidates:
            target = self.root / cand.name
            if target.exists() and cand.name not in lock:
                raise HabakkukError(
                    f"{target}: exists and was not installed from a source (hand-made?); "
                    f"remove it, or install under another name with --name"
                )
        outcomes: list[Outcome] = []
        for cand in staged.candidates:
            outcomes.append(self._place_one(staged, cand, lock))
            write_lock(self.root, lock)
        return outcomes

    def _entry(
        self, staged: Staged, cand: Candidate, old: LockEntry | None, *, approved: bool
    ) -> LockEntry:
        stamp = now()
        fetched = staged.fetched
        return LockEntry(
            name=cand.name,
            source=staged.source.text,
            kind=staged.source.kind,
            ref=fetched.ref if staged.source.kind != "registry" else fetched.source.ref,
            resolved=fetched.resolved,
            tree_hash=cand.plan.tree_hash,
            verdict=cand.plan.report.verdict,
            findings=[f.as_json() for f in cand.plan.report.findings],
            approved=approved,
            enabled=old.enabled if (old and approved) else False,
            registry=fetched.registry,
            subpath=cand.subpath,
            installed_at=old.installed_at if old and old.installed_at else stamp,
            updated_at=stamp,
        )

    def _place_one(self, staged: Staged, cand: Candidate, lock: dict[str, LockEntry]) -> Outcome:
        target = self.root / cand.name
        old = lock.get(cand.name)
        backup = ""
        if target.exists():
            kept = back_up(self.root, self.home, target, "replaced", old.as_json() if old else None)
            backup = str(kept.folder.relative_to(self.root))
            retired = staged.staging / f"retired-{cand.name}"
            os.replace(target, retired)
            os.replace(cand.folder, target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(cand.folder, target)
        unchanged = old is not None and same_hash(old.tree_hash, cand.plan.tree_hash)
        lock[cand.name] = self._entry(
            staged, cand, old, approved=bool(old and old.approved and unchanged)
        )
        status: Literal["installed", "replaced"] = "replaced" if backup else "installed"
        return Outcome(cand.name, status, cand.plan, target, backup=backup)

    # -- the whole flows ---------------------------------------------------------------

    async def install(
        self,
        text: str,
        *,
        name: str | None = None,
        yes: bool = False,
        on_plan: Callable[[InstallPlan], None] | None = None,
    ) -> list[Outcome]:
        """Install `text`'s skills (see the module docstring); `on_plan` sees each plan
        before anything is placed."""
        async with Http() as http:
            staged = await self.stage(http, text, name=name)
        try:
            for cand in staged.candidates:
                if on_plan:
                    on_plan(cand.plan)
            return self.place(staged, yes=yes)
        finally:
            staged.cleanup()

    async def update(
        self,
        name: str | None = None,
        *,
        yes: bool = False,
        on_plan: Callable[[InstallPlan], None] | None = None,
        on_error: Callable[[str, HabakkukError], None] | None = None,
    ) -> list[Outcome]:
        """Update one installed skill, or all of them. With `on_error`, a skill that
        cannot be updated is reported to it and the others go on; without, it raises."""
        lock, problem = read_lock(self.root)
        if problem:
            raise HabakkukError(problem)
        if name is not None and name not in lock:
            raise NotFound(
                f"{name!r}: not installed from a source (no entry in {self.root / '.lock.json'})"
            )
        names = [name] if name is not None else sorted(lock)
        outcomes: list[Outcome] = []
        async with Http() as http:
            for each in names:
                try:
                    outcomes.append(await self._update_one(http, lock[each], yes, on_plan))
                except HabakkukError as exc:
                    if on_error is None:
                        raise
                    on_error(each, exc)
        return outcomes

    async def _update_one(
        self,
        http: Http,
        entry: LockEntry,
        yes: bool,
        on_plan: Callable[[InstallPlan], None] | None,
    ) -> Outcome:
        source = parse_source(entry.source, self.registries)
        staging = self._new_staging()
        try:
            staged = await self._fetch(http, source, staging)
            fetched = staged.fetched
            folder = (
                fetched.root.joinpath(*entry.subpath.split("/"))
                if entry.subpath
                else (fetched.root)
            )
            if not (folder / self.kind.marker).is_file():
                where = entry.subpath or "its root"
                raise HabakkukError(
                    f"{entry.name}: {entry.source} no longer has a {self.kind.label} at {where}"
                )
            entries = tree_entries(folder)
            same = same_hash(hash_entries(entries), entry.tree_hash)
            if same and (self.root / entry.name).is_dir():
                return Outcome(entry.name, "unchanged")
            cand = await self._candidate(staged, entry.name, folder)
            if on_plan:
                on_plan(cand.plan)
            self._refuse_dangerous([cand.plan], yes)
            with held(self.root):
                return self._apply_update(staged, cand, entry)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _apply_update(self, staged: Staged, cand: Candidate, entry: LockEntry) -> Outcome:
        target = self.root / entry.name
        lock, _ = read_lock(self.root)
        if not target.is_dir():  # removed by hand since: put the new version there
            os.replace(cand.folder, target)
            lock[entry.name] = self._entry(staged, cand, entry, approved=False)
            write_lock(self.root, lock)
            return Outcome(entry.name, "updated", cand.plan, target, changed=cand.plan.files)
        kept = back_up(self.root, self.home, target, "updated", entry.as_json())
        old = {e.path: e for e in tree_entries(target)}
        new = {e.path: e for e in cand.entries}
        changed = sorted(p for p, e in new.items() if p not in old or old[p].sha256 != e.sha256)
        removed = sorted(p for p in old if p not in new)
        for rel in changed:
            dest = target.joinpath(*rel.split("/"))
            if dest.is_dir():  # a folder became a file
                shutil.rmtree(dest)
            for parent in reversed(dest.relative_to(target).parents):
                folder = target / parent
                if folder.exists() and not folder.is_dir():
                    folder.unlink()  # a file became a folder
                folder.mkdir(exist_ok=True, mode=DIR_MODE)
            temp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.new")
            shutil.copyfile(cand.folder.joinpath(*rel.split("/")), temp)
            os.chmod(temp, 0o600)
            os.replace(temp, dest)
        for rel in removed:
            target.joinpath(*rel.split("/")).unlink(missing_ok=True)
        _drop_empty_folders(target)
        lock[entry.name] = self._entry(staged, cand, entry, approved=False)
        write_lock(self.root, lock)
        return Outcome(
            entry.name,
            "updated",
            cand.plan,
            target,
            changed=tuple(changed),
            removed=tuple(removed),
            backup=str(kept.folder.relative_to(self.root)),
        )


def _drop_empty_folders(root: Path) -> None:
    for folder, _dirs, _files in sorted(os.walk(root), key=lambda t: -len(t[0])):
        path = Path(folder)
        if path != root and not any(path.iterdir()):
            path.rmdir()
