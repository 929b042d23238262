"""Workspace checkpoints kept in a shadow git repository.

Before the first call in a turn that may change the workspace, the registry takes a snapshot:
a commit in ``$HABAKKUK_HOME/checkpoints/<agent>``, a repository driven with ``GIT_DIR`` and
``GIT_WORK_TREE`` so the workspace's own ``.git`` is never read or written. No user or system
git configuration is loaded, so no hooks, signing, filters or attribute drivers run.

What a snapshot holds: every file git would see in the work tree, minus what ``.gitignore``
ignores, files over ``max_file_mb``, anything inside a nested repository (a folder holding a
``.git``) and ``.git`` itself at every level. A snapshot whose new and changed files add up to
more than ``max_mb`` is skipped and logged.

Restoring writes the checkpoint's files back, removes files that are in the workspace now but
not in the checkpoint, and leaves ignored, oversized and nested-repository files alone. The
state it replaces is snapshotted first, so every restore can itself be rolled back.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

KINDS = ("turn", "undo", "rollback")

_MB = 1024 * 1024
_ID_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
_KIND = "Habakkuk-Kind"
_SESSION = "Habakkuk-Session"
_REQUEST = "Habakkuk-Request"
# Long requests are cut: the commit message is for finding a checkpoint, not for archiving.
_REQUEST_MAX = 2000
_STAT_WIDTH = "--stat=120"
_UNDO_FILE = "undo.json"

# Everything git would otherwise take from configuration is pinned here, on every command.
_CONFIG: tuple[str, ...] = tuple(
    arg
    for pair in (
        f"core.hooksPath={os.devnull}",
        "commit.gpgSign=false",
        "tag.gpgSign=false",
        "user.name=Habakkuk",
        "user.email=checkpoints@habakkuk.invalid",
        "core.autocrlf=false",
        "core.safecrlf=false",
        "core.fsmonitor=false",
        "core.quotePath=false",
        "core.splitIndex=false",
        "submodule.recurse=false",
        "gc.autoDetach=false",
        "init.defaultBranch=main",
    )
    for arg in ("-c", pair)
)

# info/attributes outranks every .gitattributes in the work tree: snapshots are byte-exact,
# whatever line-ending or filter attributes the workspace declares.
_ATTRIBUTES = "* -text -eol -crlf -filter -ident -working-tree-encoding\n"


@dataclass(frozen=True)
class Checkpoint:
    """One snapshot of the workspace."""

    id: str
    created_at: datetime
    kind: str  # "turn" | "undo" | "rollback"
    session: str
    request: str


class CheckpointError(Exception):
    """A checkpoint operation failed; the message says what and where."""


@dataclass(frozen=True)
class _Entry:
    checkpoint: Checkpoint
    tree: str


@dataclass
class _Plan:
    """How to bring an index in line with the work tree."""

    add: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    new_bytes: int = 0
    oversized: list[str] = field(default_factory=list)


def _split_z(data: bytes) -> list[str]:
    """Split git's NUL-terminated output into paths, keeping undecodable bytes."""
    return [os.fsdecode(p) for p in data.split(b"\0") if p]


def _join_z(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _escape_pattern(rel: str) -> str:
    """Escape a literal path for a gitignore pattern."""
    escaped = re.sub(r"([*?\[\\])", r"\\\1", rel)
    if escaped.startswith(("#", "!")):
        escaped = "\\" + escaped
    return escaped


class Checkpoints:
    """Snapshots of one agent's workspace in a shadow repository at ``repo_dir``."""

    def __init__(
        self, repo_dir: Path, workspace: Path, *, max_mb: int = 200, max_file_mb: int = 20
    ) -> None:
        """Prepare (lazily) the shadow repository ``repo_dir`` for ``workspace``."""
        self.repo_dir = Path(repo_dir).absolute()
        self.workspace = Path(workspace).absolute()
        self.max_bytes = max_mb * _MB
        self.max_file_bytes = max_file_mb * _MB
        self._home = self.repo_dir / "empty-home"
        self._lock = asyncio.Lock()
        self._ready = False

    @staticmethod
    def available() -> bool:
        """Whether git is on PATH, without which there are no checkpoints."""
        return shutil.which("git") is not None

    # ------------------------------------------------------------------ public API

    async def snapshot(self, *, kind: str, session: str, request: str) -> Checkpoint | None:
        """Commit the workspace as it is now.

        An unchanged workspace still gets a checkpoint, so /undo always has a point to go back
        to. Returns None only when the new and changed files exceed ``max_mb`` (logged).
        """
        if kind not in KINDS:
            raise CheckpointError(f"checkpoint kind {kind!r} is not one of {', '.join(KINDS)}")
        async with self._lock:
            await self._ensure_repo()
            return await self._snapshot_locked(kind=kind, session=session, request=request)

    async def list(self, n: int = 20, session: str | None = None) -> builtins.list[Checkpoint]:
        """The newest ``n`` checkpoints, newest first, optionally of one session only."""
        async with self._lock:
            await self._ensure_repo()
            entries = await self._entries(None if session is not None else n)
        found = [e.checkpoint for e in entries]
        if session is not None:
            found = [c for c in found if c.session == session]
        return found[: max(n, 0)]

    async def diff_stat(self, checkpoint_id: str, path: str | None = None) -> str:
        """What restoring ``checkpoint_id`` (or one path of it) would change, as git's --stat.

        Returns "no changes" when the workspace already matches.
        """
        async with self._lock:
            await self._ensure_repo()
            target = await self._resolve(checkpoint_id)
            rel = self._relpath(path)
            await self._check_path(target, rel)
            current = await self._workspace_tree()
            return await self._stat(current, target, rel)

    async def restore(self, checkpoint_id: str, path: str | None = None) -> str:
        """Restore the whole workspace, or one path, to ``checkpoint_id``.

        The current state is snapshotted first (kind "rollback"). Returns the diff stat of what
        changed, or "no changes".
        """
        async with self._lock:
            await self._ensure_repo()
            label = checkpoint_id.strip()[:12] + (f" {path}" if path else "")
            _, text = await self._restore_locked(
                checkpoint_id, path, kind="rollback", session="", request=f"rollback to {label}"
            )
            return text

    async def undo(self, session: str) -> tuple[Checkpoint, str] | None:
        """Restore the workspace to before ``session``'s latest turn that changed it.

        Repeated calls walk further back through the session's turns; a new turn of the
        session starts the walk again from the top. Returns the checkpoint restored and the
        diff stat, or None when there is nothing (more) to undo.
        """
        async with self._lock:
            await self._ensure_repo()
            entries = await self._entries(None)
            if not entries:
                return None
            pointers = await asyncio.to_thread(self._read_pointers)
            start = self._undo_start(entries, session, pointers.get(session))
            current = await self._workspace_tree()
            for i in range(start, len(entries)):
                entry = entries[i]
                if entry.checkpoint.kind != "turn" or entry.checkpoint.session != session:
                    continue
                # The state the turn left behind is whatever was snapshotted next, or the
                # workspace itself when nothing has been since. A turn that left things as they
                # were, or whose starting point the workspace is already at, has nothing to undo.
                after = entries[i - 1].tree if i > 0 else current
                if entry.tree in (after, current):
                    continue
                target = entry.checkpoint
                taken, text = await self._restore_locked(
                    target.id, None, kind="undo", session=session, request=f"/undo to {target.id}"
                )
                pointers[session] = {"target": target.id, "at": taken.id}
                await asyncio.to_thread(self._write_pointers, pointers)
                return target, text
            return None

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _undo_start(entries: builtins.list[_Entry], session: str, pointer: object) -> int:
        """Index in ``entries`` where the walk for the next undo starts."""
        if not isinstance(pointer, dict):
            return 0
        ids = [e.checkpoint.id for e in entries]
        target, at = pointer.get("target"), pointer.get("at")
        if target not in ids or at not in ids:
            return 0
        at_index = ids.index(at)
        newer_turn = any(
            e.checkpoint.kind == "turn" and e.checkpoint.session == session
            for e in entries[:at_index]
        )
        return 0 if newer_turn else ids.index(target) + 1

    def _env(
        self, index: Path | None = None, extra: dict[str, str] | None = None
    ) -> dict[str, str]:
        # Built from scratch: nothing of the caller's environment (GIT_INDEX_FILE, GIT_DIR of
        # an enclosing hook, an external diff, config) may leak into the shadow repository.
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(self._home),
            "XDG_CONFIG_HOME": str(self._home),
            "GIT_DIR": str(self.repo_dir),
            "GIT_WORK_TREE": str(self.workspace),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_SYSTEM": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
        for name in ("TMPDIR", "SYSTEMROOT"):
            if name in os.environ:
                env[name] = os.environ[name]
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        if extra:
            env.update(extra)
        return env

    async def _git(
        self,
        *args: str,
        stdin: bytes | None = None,
        index: Path | None = None,
        extra_env: dict[str, str] | None = None,
        ok: tuple[int, ...] = (0,),
    ) -> tuple[int, bytes]:
        """Run git on the shadow repository; return its exit code and stdout."""
        try:
            proc = await asyncio.create_subprocess_exec(
                "git",
                *_CONFIG,
                *args,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.workspace,
                env=self._env(index, extra_env),
            )
        except FileNotFoundError as exc:
            if not self.available():
                raise CheckpointError("checkpoints need git, which is not on PATH") from exc
            raise CheckpointError(f"workspace {self.workspace} does not exist") from exc
        try:
            out, err = await proc.communicate(stdin)
        except asyncio.CancelledError:
            # A cancelled turn must not leave git writing to the shadow repository.
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        code = proc.returncode if proc.returncode is not None else -1
        if code not in ok:
            lines = err.decode(errors="replace").strip().splitlines()
            reason = lines[-1] if lines else f"exit status {code}"
            raise CheckpointError(f"git {args[0]} failed in checkpoints {self.repo_dir}: {reason}")
        return code, out

    async def _ensure_repo(self) -> None:
        """Create the shadow repository (mode 0700) and its exclusions on first use."""
        if not await asyncio.to_thread(self.workspace.is_dir):
            raise CheckpointError(f"workspace {self.workspace} is not a directory")
        if self._ready:
            return

        def prepare() -> bool:
            self.repo_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.repo_dir, 0o700)
            self._home.mkdir(exist_ok=True, mode=0o700)
            return (self.repo_dir / "HEAD").is_file()

        if not await asyncio.to_thread(prepare):
            # No templates: nothing (sample hooks included) is copied in.
            await self._git("init", "-q", "--template=")
        await asyncio.to_thread(self._write_info)
        self._ready = True

    def _write_info(self) -> None:
        info = self.repo_dir / "info"
        info.mkdir(exist_ok=True)
        exclude = [
            "# Written by Habakkuk: a workspace's own repository is never snapshotted.",
            ".git",
        ]
        try:
            inside = self.repo_dir.resolve().relative_to(self.workspace.resolve())
        except ValueError:
            inside = None
        if inside is not None and inside.parts:
            exclude.append("/" + _escape_pattern(inside.as_posix()) + "/")
        (info / "exclude").write_text("\n".join(exclude) + "\n", encoding="utf-8")
        (info / "attributes").write_text(_ATTRIBUTES, encoding="utf-8")

    async def _head(self) -> str | None:
        code, out = await self._git("rev-parse", "-q", "--verify", "HEAD^{commit}", ok=(0, 1))
        return out.decode().strip() if code == 0 else None

    async def _plan(self, index: Path) -> _Plan:
        """Compare the index with the work tree and decide what to stage or drop."""
        _, status = await self._git(
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=none",
            index=index,
        )
        _, tracked = await self._git("ls-files", "-z", "--cached", index=index)
        _, ignored = await self._git(
            "ls-files", "-z", "--cached", "--ignored", "--exclude-standard", index=index
        )
        changed = [entry[3:] for entry in _split_z(status)]
        return await asyncio.to_thread(
            self._classify, changed, _split_z(tracked), set(_split_z(ignored))
        )

    def _classify(
        self, changed: builtins.list[str], tracked: builtins.list[str], ignored: set[str]
    ) -> _Plan:
        plan = _Plan()
        nested = _NestedRepos(self.workspace)
        for rel in changed:
            if rel.endswith("/"):
                # git shows an untracked nested repository as its folder; it is never entered.
                continue
            if rel in ignored or nested.inside(rel):
                plan.remove.append(rel)
                continue
            try:
                st = os.lstat(self.workspace / rel)
            except (FileNotFoundError, NotADirectoryError):
                plan.remove.append(rel)
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                plan.remove.append(rel)
            elif st.st_size > self.max_file_bytes:
                plan.remove.append(rel)
                plan.oversized.append(rel)
            else:
                plan.add.append(rel)
                plan.new_bytes += st.st_size
        seen: set[str] = set(changed)
        for rel in tracked:
            if rel not in seen and (rel in ignored or nested.inside(rel)):
                plan.remove.append(rel)
        return plan

    async def _apply(self, plan: _Plan, index: Path) -> str:
        """Stage ``plan`` into ``index`` and return the tree it describes."""
        if plan.remove:
            await self._git(
                "update-index",
                "--force-remove",
                "-z",
                "--stdin",
                stdin=_join_z(plan.remove),
                index=index,
            )
        if plan.add:
            await self._git(
                "update-index",
                "--add",
                "--remove",
                "--replace",
                "-z",
                "--stdin",
                stdin=_join_z(plan.add),
                index=index,
            )
        _, out = await self._git("write-tree", index=index)
        return out.decode().strip()

    async def _scratch_index(self, *, copy: bool = True) -> Path:
        """A copy of the shadow index (or a fresh name with ``copy=False``).

        Working on a copy means a half-done operation never damages the real index.
        """

        def make() -> Path:
            fd, name = tempfile.mkstemp(prefix="index.scratch.", dir=self.repo_dir)
            os.close(fd)
            scratch = Path(name)
            real = self.repo_dir / "index"
            if copy and real.is_file():
                # copy2 keeps the index's mtime, which git's racy-entry check compares file
                # mtimes against; a fresh mtime would hide same-size edits made in the same
                # second as the last snapshot.
                shutil.copy2(real, scratch)
            else:
                # git refuses an empty index file; without one it starts from nothing.
                scratch.unlink()
            return scratch

        return await asyncio.to_thread(make)

    async def _workspace_tree(self) -> str:
        """The tree a snapshot taken now would record, without committing it."""
        scratch = await self._scratch_index()
        try:
            plan = await self._plan(scratch)
            return await self._apply(plan, scratch)
        finally:
            await asyncio.to_thread(scratch.unlink, missing_ok=True)

    async def _snapshot_locked(self, *, kind: str, session: str, request: str) -> Checkpoint | None:
        scratch = await self._scratch_index()
        try:
            plan = await self._plan(scratch)
            if plan.oversized:
                log.info(
                    "checkpoint of %s leaves out %d file(s) over %d MB: %s",
                    self.workspace,
                    len(plan.oversized),
                    self.max_file_bytes // _MB,
                    ", ".join(plan.oversized[:10]),
                )
            if plan.new_bytes > self.max_bytes:
                log.warning(
                    "checkpoint of %s skipped: new and changed files add up to %.1f MB, "
                    "over checkpoint_max_mb %d",
                    self.workspace,
                    plan.new_bytes / _MB,
                    self.max_bytes // _MB,
                )
                return None
            tree = await self._apply(plan, scratch)
            parent = await self._head()
            now = datetime.now(UTC).replace(microsecond=0)
            date = f"@{int(now.timestamp())} +0000"
            request = request[:_REQUEST_MAX]
            summary = (request.strip().splitlines() or [""])[0][:72]
            message = (
                f"{kind}: {summary}\n\n"
                f"{_KIND}: {kind}\n"
                f"{_SESSION}: {json.dumps(session)}\n"
                f"{_REQUEST}: {json.dumps(request)}\n"
            )
            args = ["commit-tree", tree] + (["-p", parent] if parent else [])
            _, out = await self._git(
                *args,
                stdin=message.encode(),
                extra_env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
            )
            commit = out.decode().strip()
            # The old value guards against another process having moved HEAD meanwhile.
            await self._git("update-ref", "-m", f"checkpoint: {kind}", "HEAD", commit, parent or "")
            await asyncio.to_thread(os.replace, scratch, self.repo_dir / "index")
        finally:
            await asyncio.to_thread(scratch.unlink, missing_ok=True)
        # Plumbing never collects garbage by itself; this is cheap below git's thresholds.
        await self._git("gc", "--auto", "--quiet")
        return Checkpoint(commit, now, kind, session, request)

    async def _entries(self, n: int | None) -> builtins.list[_Entry]:
        """Checkpoints with their trees, newest first."""
        if await self._head() is None:
            return []
        args = ["log", "-z", "--format=%H%x1f%T%x1f%ct%x1f%B"]
        if n is not None:
            args.append(f"--max-count={max(n, 0)}")
        _, out = await self._git(*args, "HEAD")
        entries = []
        for record in out.decode(errors="replace").split("\0"):
            parts = record.strip("\n").split("\x1f", 3)
            if len(parts) != 4:
                continue
            commit, tree, when, body = parts
            fields = _trailers(body)
            if _KIND not in fields:
                continue
            created = datetime.fromtimestamp(int(when), UTC)
            checkpoint = Checkpoint(
                commit, created, fields[_KIND], fields.get(_SESSION, ""), fields.get(_REQUEST, "")
            )
            entries.append(_Entry(checkpoint, tree))
        return entries

    async def _resolve(self, checkpoint_id: str) -> str:
        """The full id of a checkpoint given by (a prefix of) its id."""
        wanted = checkpoint_id.strip()
        if not _ID_RE.match(wanted):
            raise CheckpointError(f"checkpoint id {checkpoint_id!r} is not a hexadecimal id")
        head = await self._head()
        if head is None:
            raise CheckpointError(f"there are no checkpoints in {self.repo_dir}")
        code, out = await self._git(
            "rev-parse", "-q", "--verify", f"{wanted}^{{commit}}", ok=(0, 1)
        )
        full = out.decode().strip()
        if code == 0:
            code, _ = await self._git("merge-base", "--is-ancestor", full, head, ok=(0, 1))
        if code != 0:
            raise CheckpointError(f"no checkpoint {wanted} in {self.repo_dir}")
        return full

    def _relpath(self, path: str | None) -> str | None:
        """``path`` relative to the workspace (posix), or None for the whole workspace."""
        if path is None or not path.strip():
            return None
        given = Path(os.path.normpath(path))
        if given.is_absolute():
            # The workspace may be named through a symlink, so try its real path as well.
            for root in (Path(os.path.normpath(self.workspace)), self.workspace.resolve()):
                if given.is_relative_to(root):
                    given = given.relative_to(root)
                    break
            else:
                raise CheckpointError(f"path {path} is outside the workspace {self.workspace}")
        rel = given.as_posix()
        if rel == ".":
            return None
        if rel == ".." or rel.startswith("../"):
            raise CheckpointError(f"path {path} is outside the workspace {self.workspace}")
        if ".git" in rel.split("/"):
            raise CheckpointError(f"path {path} is inside a .git folder, which checkpoints skip")
        return rel

    async def _check_path(self, target: str, rel: str | None) -> None:
        """Refuse a path that names nothing, neither in the checkpoint nor in the workspace."""
        if rel is None:
            return
        _, listed = await self._git("ls-tree", "-r", "--name-only", "-z", target, "--", rel)
        present = await asyncio.to_thread(os.path.lexists, self.workspace / rel)
        if not listed and not present:
            raise CheckpointError(
                f"{rel} is neither in checkpoint {target[:12]} nor in the workspace"
            )

    async def _stat(self, old: str, new: str, rel: str | None) -> str:
        args = ["diff", _STAT_WIDTH, "--no-color", old, new]
        if rel is not None:
            args += ["--", rel]
        _, out = await self._git(*args)
        text = out.decode(errors="replace").rstrip("\n")
        return text or "no changes"

    async def _restore_locked(
        self, checkpoint_id: str, path: str | None, *, kind: str, session: str, request: str
    ) -> tuple[Checkpoint, str]:
        target = await self._resolve(checkpoint_id)
        rel = self._relpath(path)
        await self._check_path(target, rel)
        taken = await self._snapshot_locked(kind=kind, session=session, request=request)
        if taken is None:
            raise CheckpointError(
                f"not restoring: the current state of {self.workspace} is over checkpoint_max_mb "
                f"({self.max_bytes // _MB} MB of new and changed files), so it could not be "
                "snapshotted first and would be lost"
            )
        args = ["diff-tree", "-r", "-z", "--no-renames", taken.id, target]
        if rel is not None:
            args += ["--", rel]
        _, raw = await self._git(*args)
        fields = _split_z(raw)
        delete: builtins.list[str] = []
        write: builtins.list[str] = []
        for meta, name in zip(fields[0::2], fields[1::2], strict=False):
            status = meta.split()[-1][:1]
            (delete if status == "D" else write).append(name)
        # Files added relative to the snapshot of the current state must not overwrite anything
        # the snapshot left out (ignored, oversized, nested-repository files).
        writable, kept = await asyncio.to_thread(
            self._delete_and_check, delete, write, set(write) - self._modified(fields)
        )
        if writable:
            scratch = await self._scratch_index(copy=False)
            try:
                await self._git("read-tree", target, index=scratch)
                await self._git(
                    "checkout-index", "-f", "-z", "--stdin", stdin=_join_z(writable), index=scratch
                )
            finally:
                await asyncio.to_thread(scratch.unlink, missing_ok=True)
        text = await self._stat(taken.id, target, rel)
        if kept:
            shown = ", ".join(kept[:10]) + (" …" if len(kept) > 10 else "")
            text += f"\nleft alone (files not in checkpoints are in the way): {shown}"
        return taken, text

    @staticmethod
    def _modified(fields: builtins.list[str]) -> set[str]:
        """Paths a raw diff marks as modified or retyped (they exist in both trees)."""
        return {
            name
            for meta, name in zip(fields[0::2], fields[1::2], strict=False)
            if meta.split()[-1][:1] in ("M", "T")
        }

    def _delete_and_check(
        self, delete: builtins.list[str], write: builtins.list[str], added: set[str]
    ) -> tuple[builtins.list[str], builtins.list[str]]:
        """Remove ``delete`` from the work tree; split ``write`` into safe and in-the-way."""
        root = self.workspace
        for rel in delete:
            target = root / rel
            if _blocked_parent(root, rel):
                # Never delete through a symlink that appeared since the snapshot.
                continue
            try:
                if target.is_symlink() or target.is_file():
                    target.unlink()
            except FileNotFoundError:
                continue
            parent = target.parent
            # Folders emptied by the restore go too; a folder with anything left in it stays.
            while parent != root and root in parent.parents:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent
        nested = _NestedRepos(root)
        writable: builtins.list[str] = []
        kept: builtins.list[str] = []
        for rel in write:
            in_the_way = rel in added and os.path.lexists(root / rel)
            if in_the_way or nested.inside(rel) or _blocked_parent(root, rel):
                kept.append(rel)
            else:
                writable.append(rel)
        return writable, kept

    def _read_pointers(self) -> dict[str, object]:
        try:
            data = json.loads((self.repo_dir / _UNDO_FILE).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_pointers(self, pointers: dict[str, object]) -> None:
        path = self.repo_dir / _UNDO_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(pointers, indent=1), encoding="utf-8")
        os.replace(tmp, path)


class _NestedRepos:
    """Answers whether a workspace path lies inside a nested repository, caching per folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, bool] = {}

    def inside(self, rel: str) -> bool:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folder = "/".join(parts[:i])
            found = self.cache.get(folder)
            if found is None:
                found = os.path.lexists(self.root / folder / ".git")
                self.cache[folder] = found
            if found:
                return True
        return False


def _blocked_parent(root: Path, rel: str) -> bool:
    """Whether a leading component of ``rel`` exists as something other than a real folder.

    Writing there would replace a file the snapshot left out, or follow a symlink out of the
    workspace.
    """
    parts = rel.split("/")[:-1]
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            return True
        if not current.exists():
            return False
        if not current.is_dir():
            return True
    return False


def _trailers(body: str) -> dict[str, str]:
    """The Habakkuk trailers of a checkpoint's commit message."""
    fields: dict[str, str] = {}
    for line in body.splitlines():
        name, sep, value = line.partition(": ")
        if not sep or name not in (_KIND, _SESSION, _REQUEST):
            continue
        if name == _KIND:
            fields[name] = value.strip()
            continue
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = value
        fields[name] = decoded if isinstance(decoded, str) else str(decoded)
    return fields
