"""The skills service: the home's skills behind `SkillsAccess` (spec 000 "Skills").

Discovery (discovery.py) finds the folders; this module adds what a surface needs: trust
and verdict from skills/.lock.json, last use from skills/.usage.json, the prompt's
snapshot, safe reads of supporting files, skill_save, explicit invocation, approval,
removal and restore.

Trust. An agent's own skills and hand-made shared ones (no lock entry) are trusted; an
installed shared skill is trusted once `habakkuk skills approve` set `approved` in its
lock entry (one whose scan said dangerous only with the user's acknowledgement that they
read its findings); a plugin's skills are trusted (enabling the plugin approved them).
The verdict and findings of an installed skill are its lock entry's; own and hand-made
skills carry none (None: never scanned by an install), because a hand edit would make a
stored one stale.

skill_save writes only the calling agent's own copy (HOME/agents/<agent>/skills/<name>/),
after a scan that fails closed: anything but a clean verdict, or a scanner that raises,
refuses it with a message that says so without naming the rule or the line. The previous
SKILL.md is kept as SKILL.md.bak, and the change is recorded in the agent's memory
history (kind "skill", path "skills/<name>/SKILL.md"), so `habakkuk memory history
--kind skill` lists it and `habakkuk memory restore` undoes it.
"""

from __future__ import annotations

import asyncio
import difflib
import errno
import json
import logging
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from habakkuk.engine.agent.prompt import (
    SKILLS_LIST_BYTES,
    SKILLS_LISTED,
    PromptSkill,
    skill_line,
)
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.toolkit.registry import ToolError
from habakkuk.knowledge.frontmatter import now
from habakkuk.knowledge.hub.backups import BACKUPS_DIR, back_up, backups, put_back
from habakkuk.knowledge.hub.lock import LockEntry, held, read_lock, write_lock
from habakkuk.knowledge.memory_types import MemoryAccess, Provenance, SecretRefused
from habakkuk.knowledge.notes import write_atomic
from habakkuk.knowledge.skills.discovery import (
    DESCRIPTION_MAX,
    SKILL_MD_MAX,
    Discovery,
    Found,
    Root,
    parse_skill_md,
    read_regular,
    supporting_files,
)
from habakkuk.knowledge.skills.types import (
    SKILL_FILE,
    SKILL_NAME,
    UNTRUSTED_CAUTION,
    Finding,
    NeedsAcknowledgement,
    RemovedSkill,
    ScanRefused,
    ScanReport,
    Skill,
    SkillsAccess,
    SkillSaved,
    SkillsSnapshot,
    SkillSummary,
    SkippedFolder,
    Verdict,
)
from habakkuk.knowledge.skills.usage import UsageLog, usage_key
from habakkuk.tools.safe_open import open_beneath

if TYPE_CHECKING:
    from habakkuk.engine.config import Config

log = logging.getLogger(__name__)

ScanFiles = Callable[[Mapping[str, bytes]], ScanReport]
SecretIn = Callable[[str], "str | None"]

FILE_MAX = 256 * 1024  # a supporting file skill_file reads at most
BODY_MAX = SKILL_MD_MAX - 4096  # what skill_save accepts (room for the frontmatter)
_WORD = re.compile(r"[a-z0-9]+")
_VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

REFUSED = (
    "skill_save: refused by the safety scan: the skill's text looks like it could run or "
    "fetch something harmful; nothing was saved. Write the skill as plain steps, or the "
    "user can review the text and install it by hand"
)


@dataclass(frozen=True)
class _Seen:
    """A skill as one agent sees it: where it lives and its summary."""

    found: Found
    summary: SkillSummary


class Skills:
    """The home's skills (implements `SkillsAccess`).

    `scan` checks skill_save's text (habakkuk.knowledge.scan.scan_files in the runtime);
    `secret_in` names a secret a text holds (the memory's check); `memory` records
    skill_save's changes in the agent's history (None: not recorded).
    """

    def __init__(
        self,
        home: Path,
        config: Config,
        *,
        scan: ScanFiles,
        secret_in: SecretIn | None = None,
        memory: MemoryAccess | None = None,
    ):
        self.home = Path(home)
        self.config = config
        self.root = self.home / "skills"
        self._scan = scan
        self._secret_in = secret_in
        self.memory = memory
        self.discovery = Discovery()
        self.usage = UsageLog(self.root)
        self._write = asyncio.Lock()
        # skills/.lock.json's read-modify-write: the thread lock within this process,
        # held() (an flock) against an install or approval from another one.
        self._lock_file = threading.Lock()

    # -- where skills are --------------------------------------------------------------

    def own_root(self, agent: str) -> Path:
        """HOME/agents/<agent>/skills."""
        return self.home / "agents" / agent / "skills"

    def _roots(self, agent: str | None) -> list[Root]:
        roots = [
            Root(Path(folder), "plugin", plugin) for plugin, folder in self.config.plugin_skill_dirs
        ]
        roots.append(Root(self.root, "shared"))
        agents = [agent] if agent is not None else sorted(self.config.agents)
        roots.extend(Root(self.own_root(name), "own") for name in agents)
        return roots

    def _check_agent(self, agent: str) -> None:
        if not isinstance(agent, str) or agent not in self.config.agents:
            known = ", ".join(sorted(self.config.agents)) or "none"
            raise NotFound(f"skills: agent {agent!r} is not configured (agents: {known})")

    def _seen(self, agent: str) -> dict[str, _Seen]:
        """Every skill `agent` sees, by name (blocking: run in a thread)."""
        found, _ = self.discovery.scan(self._roots(agent))
        entries, problem = read_lock(self.root)
        if problem:
            log.warning("%s", problem)
        used = self.usage.read()
        return {
            name: _Seen(item, self._summary(agent, item, entries, used))
            for name, item in found.items()
        }

    @staticmethod
    def _summary(
        agent: str, item: Found, entries: dict[str, LockEntry], used: dict[str, str]
    ) -> SkillSummary:
        verdict: Verdict | None = None
        findings: tuple[Finding, ...] = ()
        if item.scope == "own":
            source, trusted = "own", True
        elif item.scope == "plugin":
            source, trusted = f"plugin:{item.plugin}", True
        elif (entry := entries.get(item.name)) is not None:
            source, trusted = entry.source, entry.approved
            # A verdict this version does not know (a newer one wrote it) counts as the worst.
            verdict = next((v for v in _VERDICTS if v == entry.verdict), "dangerous")
            findings = _findings(entry.findings)
        else:
            source, trusted = "hand", True
        return SkillSummary(
            name=item.name,
            description=item.description,
            scope=item.scope,
            source=source,
            trusted=trusted,
            verdict=verdict,
            last_used=used.get(usage_key(agent, item.scope, item.name)),
            updated=item.updated,
            pinned=item.pinned,
            plugin=item.plugin,
            warning=item.warning,
            findings=findings,
        )

    async def _find(self, agent: str, name: str) -> _Seen:
        self._check_agent(agent)
        seen = await asyncio.to_thread(self._seen, agent)
        hit = seen.get(name) if isinstance(name, str) else None
        if hit is None:
            raise _unknown(name, list(seen))
        return hit

    # -- reading -----------------------------------------------------------------------

    async def list_skills(self, agent: str) -> list[SkillSummary]:
        """The agent's own skills and the shared ones (own winning a clash), by name."""
        self._check_agent(agent)
        seen = await asyncio.to_thread(self._seen, agent)
        return [seen[name].summary for name in sorted(seen)]

    async def skill(self, agent: str, name: str, *, record_use: bool = False) -> Skill:
        """One skill with its instructions and supporting files; NotFound when none."""
        hit = await self._find(agent, name)
        body, files = await asyncio.to_thread(self._load, hit.found)
        summary = hit.summary
        if record_use:
            stamp = await asyncio.to_thread(
                self.usage.record, usage_key(agent, summary.scope, summary.name)
            )
            summary = _replace_used(summary, stamp)
        return Skill(summary=summary, body=body, files=files, caution=caution(summary))

    @staticmethod
    def _load(found: Found) -> tuple[str, tuple[str, ...]]:
        try:
            text = read_regular(found.folder / SKILL_FILE)
        except (OSError, UnicodeDecodeError) as exc:
            raise HabakkukError(f"skill {found.name}: cannot read {SKILL_FILE}: {exc}") from None
        parsed = parse_skill_md(text, found.name)
        if isinstance(parsed, str):
            raise HabakkukError(f"skill {found.name}: {parsed}")
        return parsed.body, supporting_files(found.folder)

    async def read_file(self, agent: str, name: str, path: str) -> str:
        """One supporting file as text, opened beneath the skill's folder."""
        hit = await self._find(agent, name)
        parts = _relative_parts(name, path)
        root = hit.found.folder.parent
        return await asyncio.to_thread(_read_beneath, root, [hit.found.name, *parts], path)

    async def search(self, agent: str, query: str, *, limit: int = 10) -> list[SkillSummary]:
        """Skills whose name or description match the words of `query`, best first
        (a whole word of the name counts most, then part of the name, then the description)."""
        words = _WORD.findall(str(query).lower())
        if not words:
            raise HabakkukError("skill search: the query has no words to look for")
        skills = await self.list_skills(agent)
        scored: list[tuple[int, str, SkillSummary]] = []
        for item in skills:
            name_words = set(_WORD.findall(item.name))
            text_words = set(_WORD.findall(item.description.lower()))
            score = 0
            for word in words:
                if word in name_words:
                    score += 100
                elif word in item.name:
                    score += 40
                if word in text_words:
                    score += 10
                elif any(w.startswith(word) for w in text_words if len(word) >= 3):
                    score += 4
            if score:
                scored.append((-score, item.name, item))
        scored.sort(key=lambda row: (row[0], row[1]))
        return [row[2] for row in scored[: max(1, int(limit))]]

    async def snapshot(self, agent: str) -> SkillsSnapshot:
        """What a new session's prompt lists: by name, at most 100 skills and 8 KB."""
        skills = await self.list_skills(agent)
        listed: list[SkillSummary] = []
        used = 0
        for item in skills[:SKILLS_LISTED]:
            size = len(skill_line(prompt_skill(item)).encode("utf-8")) + 1
            if used + size > SKILLS_LIST_BYTES:
                break
            listed.append(item)
            used += size
        return SkillsSnapshot(skills=tuple(listed), missing=len(skills) - len(listed))

    async def skipped(self, agent: str | None = None) -> list[SkippedFolder]:
        """Folders under the skills directories that are not skills (every agent's own
        folders too when `agent` is None)."""
        if agent is not None:
            self._check_agent(agent)
        _, skipped = await asyncio.to_thread(self.discovery.scan, self._roots(agent))
        return skipped

    # -- invoking ----------------------------------------------------------------------

    async def invocation(self, agent: str, name: str, request: str) -> str:
        """The message of an explicit invocation: the caution first when untrusted, the
        whole SKILL.md body, its supporting files, then the request. Records the use."""
        skill = await self.skill(agent, name, record_use=True)
        return invocation_message(skill, request)

    # -- writing -----------------------------------------------------------------------

    async def save(
        self, agent: str, name: str, description: str, body: str, *, provenance: Provenance
    ) -> SkillSaved:
        """Write the agent's own copy after the scan and the secret check."""
        self._check_agent(agent)
        name, description, body = _checked(name, description, body)
        folder = self.own_root(agent) / name
        async with self._write:
            before = await asyncio.to_thread(_read_or_none, folder / SKILL_FILE)
            pinned = False
            if before is not None:
                parsed = parse_skill_md(before, name)
                pinned = not isinstance(parsed, str) and parsed.pinned
            text = render_skill_md(name, description, body, pinned=pinned)
            if text == before:
                summary = await self._own_summary(agent, name)
                return SkillSaved(skill=summary, created=False, unchanged=True)
            # Off the loop: a hostile 250 KB body takes the scanner seconds to read.
            await asyncio.to_thread(self._refuse, text)
            self._refuse_secrets(description, body)
            await asyncio.to_thread(_write_skill, folder, before, text)
            if self.memory is not None:
                await self.memory.record_change(
                    agent,
                    "skill",
                    name,
                    f"skills/{name}/{SKILL_FILE}",
                    before,
                    text,
                    provenance,
                )
            summary = await self._own_summary(agent, name)
        return SkillSaved(skill=summary, created=before is None)

    async def _own_summary(self, agent: str, name: str) -> SkillSummary:
        return (await self._find(agent, name)).summary

    def _refuse(self, text: str) -> None:
        """Fail closed: only a clean verdict passes; the reason never names the rule."""
        try:
            report = self._scan({SKILL_FILE: text.encode("utf-8")})
            verdict = report.verdict
        except Exception:  # a scanner that breaks refuses, it never lets through
            log.exception("skill_save: the scan failed; refusing")
            raise ScanRefused(REFUSED) from None
        if verdict != "clean":
            raise ScanRefused(REFUSED)

    def _refuse_secrets(self, description: str, body: str) -> None:
        if self._secret_in is None:
            return
        for what, text in (("description", description), ("body", body)):
            found = self._secret_in(text)
            if found:
                raise SecretRefused(
                    f"skill_save: the {what} holds {found}; secrets are never stored in "
                    "skills (keep it in the home's .env or a password manager)"
                )

    # -- approving, removing, restoring ------------------------------------------------

    async def approve(self, name: str, *, acknowledged: bool = False) -> SkillSummary:
        """Set `approved` in the installed skill's lock entry; a skill whose scan said
        dangerous only when `acknowledged` (else NeedsAcknowledgement with its findings)."""
        return await asyncio.to_thread(self._approve, str(name), acknowledged)

    def _approve(self, name: str, acknowledged: bool) -> SkillSummary:
        with self._lock_file, held(self.root):
            entries, problem = read_lock(self.root)
            if problem:
                raise HabakkukError(problem)
            entry = entries.get(name)
            found, _ = self.discovery.scan([Root(self.root, "shared")])
            if entry is None:
                if name in found:
                    raise HabakkukError(
                        f"skill {name} was made by hand in {self.root}, not installed; "
                        "it is trusted already and needs no approval"
                    )
                raise NotFound(f"no installed skill {name!r} in {self.root / '.lock.json'}")
            if name not in found:
                raise NotFound(f"skill {name}: its folder {self.root / name} is missing")
            before = self._summary("", found[name], entries, {})
            # The one rule for every surface: trusting what the scan called dangerous
            # takes the user's word that they read why.
            if before.needs_acknowledgement and not acknowledged:
                raise NeedsAcknowledgement(before)
            if not entry.approved:
                entry.approved = True
                entry.updated_at = now()
                write_lock(self.root, entries)
        return self._summary("", found[name], entries, self.usage.read())

    async def remove(self, agent: str, name: str) -> RemovedSkill:
        """Back up, then remove, the skill `agent` sees by that name (own, else shared)."""
        hit = await self._find(agent, name)
        if hit.found.scope == "plugin":
            raise HabakkukError(
                f"skill {name} comes with the plugin {hit.found.plugin}; it goes when the "
                f"plugin is disabled or removed (`habakkuk plugins disable {hit.found.plugin}`)"
            )
        async with self._write:
            before = await asyncio.to_thread(_read_or_none, hit.found.folder / SKILL_FILE)
            backup = await asyncio.to_thread(self._remove, agent, hit.found)
            if hit.found.scope == "own" and self.memory is not None:
                await self.memory.record_change(
                    agent,
                    "skill",
                    name,
                    f"skills/{name}/{SKILL_FILE}",
                    before,
                    None,
                    Provenance(by="user", note="skill removed"),
                )
        return RemovedSkill(name=name, backup=backup)

    def _remove(self, agent: str, found: Found) -> str:
        with self._lock_file, held(self.root):
            entries, problem = read_lock(self.root)
            if problem and found.scope == "shared":
                raise HabakkukError(problem)  # never drop an entry we could not read
            entry = entries.get(found.name) if found.scope == "shared" else None
            made = back_up(
                self.root,
                self.home,
                found.folder,
                "removed",
                entry.as_json() if entry is not None else None,
            )
            shutil.rmtree(found.folder)
            if entry is not None:
                del entries[found.name]
                write_lock(self.root, entries)
        self.usage.forget(usage_key(agent, found.scope, found.name))
        return str(made.folder.relative_to(self.root / BACKUPS_DIR))

    async def restore(self, agent: str, name: str) -> SkillSummary:
        """Put back the newest backup of `name` that `agent` may reach (its own or a
        shared one), backing up what is there now first."""
        self._check_agent(agent)
        if not isinstance(name, str) or not SKILL_NAME.fullmatch(name):
            raise HabakkukError(f"skill name {name!r}: must match {SKILL_NAME.pattern}")
        async with self._write:
            await asyncio.to_thread(self._restore, agent, name)
        return (await self._find(agent, name)).summary

    def _restore(self, agent: str, name: str) -> None:
        mine = (f"skills/{name}", f"agents/{agent}/skills/{name}")
        candidates = [b for b in backups(self.root, name) if b.origin in mine]
        if not candidates:
            raise NotFound(f"no backup of skill {name!r} in {self.root / BACKUPS_DIR / name}")
        backup = candidates[0]
        target = self.home / backup.origin
        with self._lock_file, held(self.root):
            entries, problem = read_lock(self.root)
            if problem and backup.lock is not None:
                raise HabakkukError(problem)
            if target.exists():
                current = entries.get(name) if backup.origin.startswith("skills/") else None
                back_up(
                    self.root,
                    self.home,
                    target,
                    "restored",
                    current.as_json() if current is not None else None,
                )
                shutil.rmtree(target)
            put_back(backup, self.home)
            if backup.origin.startswith("skills/"):
                if backup.lock is not None:
                    entries[name] = LockEntry.from_json(name, dict(backup.lock))
                else:
                    entries.pop(name, None)
                write_lock(self.root, entries)


# -- helpers --------------------------------------------------------------------------


def _findings(stored: object) -> tuple[Finding, ...]:
    """A lock entry's findings (Finding.as_json each) as Findings; what cannot be read
    as one still shows, as a dangerous finding saying what it held."""
    if not isinstance(stored, list):
        return ()
    findings = []
    for item in stored:
        data = item if isinstance(item, dict) else {}
        severity = data.get("severity")
        line = data.get("line")
        findings.append(
            Finding(
                severity=severity if severity in ("caution", "dangerous") else "dangerous",
                rule=str(data.get("rule", "")),
                file=str(data.get("file", "")) or "?",
                line=line if isinstance(line, int) and line >= 0 else 0,
                message=str(data.get("message", "")) or " ".join(str(item).split())[:200],
            )
        )
    return tuple(findings)


def caution(summary: SkillSummary) -> str:
    """UNTRUSTED_CAUTION for an untrusted skill, "" for a trusted one."""
    if summary.trusted:
        return ""
    return UNTRUSTED_CAUTION.format(source=summary.source, name=summary.name)


def prompt_skill(summary: SkillSummary) -> PromptSkill:
    """The # Skills line's values for one skill."""
    return PromptSkill(summary.name, summary.description, untrusted=not summary.trusted)


def invocation_title(name: str, request: str) -> str:
    """The first line of an invocation: the skill and the user's request ("Skill
    weekly-report: for May"), which a new session takes as its title, never the
    caution or the skill's own text."""
    wanted = " ".join(request.strip().splitlines()[:1]).strip()
    return f"Skill {name}: {wanted}" if wanted else f"Skill {name}"


def invocation_message(skill: Skill, request: str) -> str:
    """What /skill NAME REQUEST and `run --skill` send as the user's message: a line
    naming the skill and the request (the session's title), the caution when the skill
    is untrusted, then the skill's instructions, its files and the request."""
    parts: list[str] = [invocation_title(skill.name, request)]
    if skill.caution:
        parts.append(skill.caution)
    parts.append(
        f'The user asks you to use the skill "{skill.name}" ({skill.summary.description}). '
        "Follow its instructions:"
    )
    parts.append(f'<skill name="{skill.name}">\n{skill.body.strip()}\n</skill>')
    if skill.files:
        listed = "\n".join(f"- {path}" for path in skill.files)
        parts.append(f"Its supporting files (read one with skill_file):\n{listed}")
    else:
        parts.append("It has no supporting files.")
    wanted = request.strip()
    parts.append(f"Request: {wanted}" if wanted else "Request: do what the skill describes.")
    return "\n\n".join(parts)


def render_skill_md(name: str, description: str, body: str, *, pinned: bool = False) -> str:
    """SKILL.md's text: frontmatter (JSON strings are YAML) then the instructions."""
    lines = ["---", f"name: {name}", f"description: {json.dumps(description, ensure_ascii=False)}"]
    if pinned:
        lines.append("pinned: true")
    lines.append("---")
    return "\n".join(lines) + "\n\n" + body.strip("\n") + "\n"


def _checked(name: object, description: object, body: object) -> tuple[str, str, str]:
    if not isinstance(name, str) or not SKILL_NAME.fullmatch(name):
        raise HabakkukError(
            f"skill_save: the name {name!r} must match {SKILL_NAME.pattern} "
            "(lower-case letters, digits and dashes)"
        )
    text = description.strip() if isinstance(description, str) else ""
    if not text:
        raise HabakkukError("skill_save: the description may not be blank")
    if "\n" in text or "\r" in text:
        raise HabakkukError("skill_save: the description must be one line")
    if len(text) > DESCRIPTION_MAX:
        raise HabakkukError(
            f"skill_save: the description is {len(text)} characters; at most {DESCRIPTION_MAX}"
        )
    steps = body.strip("\n") if isinstance(body, str) else ""
    if not steps.strip():
        raise HabakkukError("skill_save: the body (the skill's instructions) may not be blank")
    if len(steps.encode("utf-8")) > BODY_MAX:
        raise HabakkukError(f"skill_save: the body is larger than {BODY_MAX // 1024} KB")
    return name, text, steps


def _unknown(name: object, known: list[str]) -> NotFound:
    close = difflib.get_close_matches(str(name), known, n=5, cutoff=0.5)
    prefix = [k for k in sorted(known) if str(name) and k.startswith(str(name)) and k not in close]
    near = (close + prefix)[:5]
    if near:
        return NotFound.said("errors.skills.unknown_near", name=repr(name), near=", ".join(near))
    return NotFound.said("errors.skills.unknown", name=repr(name))


def _relative_parts(name: str, path: object) -> list[str]:
    if not isinstance(path, str) or not path.strip():
        raise HabakkukError(f"skill {name}: give the path of a file inside the skill's folder")
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        raise HabakkukError(f"skill {name}: {path!r} is absolute; give a path inside the skill")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise HabakkukError(f"skill {name}: {path!r} leads out of the skill's folder (..)")
    if not parts:
        raise HabakkukError(f"skill {name}: give the path of a file inside the skill's folder")
    if parts == [SKILL_FILE + ".bak"]:
        raise HabakkukError(
            f"skill {name}: {SKILL_FILE}.bak is the previous version, not a supporting file"
        )
    return parts


def _read_beneath(root: Path, parts: list[str], shown: str) -> str:
    """The text of root/parts..., every step opened with O_NOFOLLOW (blocking)."""
    label = f"skill {parts[0]}: {shown}"
    try:
        dir_fd = open_beneath(root, parts[:-1], create=False, label=label)
    except ToolError:
        raise HabakkukError(f"{label}: a folder on the way is a symbolic link; refused") from None
    except FileNotFoundError:
        raise NotFound(f"{label}: no such file in the skill") from None
    except NotADirectoryError:
        raise NotFound(f"{label}: no such file in the skill") from None
    except OSError as exc:
        raise HabakkukError(f"{label}: cannot open: {exc.strerror}") from None
    try:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            raise NotFound(f"{label}: no such file in the skill") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise HabakkukError(f"{label}: is a symbolic link; refused") from None
            raise HabakkukError(f"{label}: cannot open: {exc.strerror}") from None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise HabakkukError(f"{label}: not a regular file")
        if info.st_size > FILE_MAX:
            raise HabakkukError(
                f"{label}: {info.st_size} bytes; skill_file reads files of at most "
                f"{FILE_MAX // 1024} KB"
            )
        data = handle.read(FILE_MAX + 1)
    if len(data) > FILE_MAX:
        raise HabakkukError(f"{label}: larger than {FILE_MAX // 1024} KB; not read")
    if b"\x00" in data:
        raise HabakkukError(f"{label}: a binary file; skill_file reads text only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HabakkukError(f"{label}: not UTF-8 text; skill_file reads text only") from None


def _read_or_none(path: Path) -> str | None:
    try:
        return read_regular(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise HabakkukError(f"{path}: cannot read: {exc}") from None


def _write_skill(folder: Path, before: str | None, text: str) -> None:
    """SKILL.md replaced atomically, the old one kept as SKILL.md.bak."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.is_symlink() or not folder.is_dir():
        raise HabakkukError(f"{folder}: is not a folder; nothing was saved")
    if before is not None:
        write_atomic(folder / (SKILL_FILE + ".bak"), before)
    write_atomic(folder / SKILL_FILE, text)


def _replace_used(summary: SkillSummary, stamp: str) -> SkillSummary:
    from dataclasses import replace

    return replace(summary, last_used=stamp)


if TYPE_CHECKING:

    def _implements_skills_access(skills: Skills) -> SkillsAccess:
        """mypy checks here that `Skills` satisfies the Protocol every surface uses."""
        return skills
