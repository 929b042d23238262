"""A delegated child's git worktree (spec 000 "Delegation", worktree: true).

The worktree of the repository holding the parent's workspace lives at
<workspace>/.habakkuk-worktrees/<job> on branch habakkuk/<job>; the folder is listed in the
repository's .git/info/exclude (never the user's .gitignore). Git runs as argument lists
with hooks off and no user or system config, so nothing of the user's setup runs or signs.
A rerun after a crash reuses the worktree. When the child ends, its changes are committed
to the branch (--no-verify, author Habakkuk) and the report gets the branch, the commit it
started from and `git diff --stat` (the base is kept beside the worktree, outside it).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.errors import HabakkukError
from habakkuk.work.delegation_types import BRANCH_PREFIX, WORKTREES_DIR

AUTHOR = "Habakkuk <habakkuk@localhost>"
_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "Habakkuk",
    "GIT_AUTHOR_EMAIL": "habakkuk@localhost",
    "GIT_COMMITTER_NAME": "Habakkuk",
    "GIT_COMMITTER_EMAIL": "habakkuk@localhost",
}


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str
    base_commit: str


@dataclass(frozen=True)
class WorktreeReport:
    branch: str
    base_commit: str
    diff_stat: str


async def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run git with hooks off and no user/system config; its stdout (HabakkukError if it fails)."""
    env = {**os.environ, **_ENV}
    process = await asyncio.create_subprocess_exec(
        "git",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "commit.gpgSign=false",
        *args,
        cwd=str(cwd),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if check and process.returncode != 0:
        message = err.decode(errors="replace").strip().splitlines()
        raise HabakkukError(
            f"git {args[0]} failed: {message[-1] if message else process.returncode}"
        )
    return out.decode(errors="replace")


async def repository_of(workspace: Path) -> Path:
    """The top of the git repository holding `workspace`; HabakkukError when there is none."""
    if not workspace.is_dir():
        raise HabakkukError(f"worktree: the workspace {workspace} does not exist")
    try:
        top = await git(workspace, "rev-parse", "--show-toplevel")
    except HabakkukError:
        raise HabakkukError(
            f"worktree: the workspace {workspace} is not inside a git repository"
        ) from None
    return Path(top.strip())


def worktree_path(workspace: Path, job: str) -> Path:
    return workspace / WORKTREES_DIR / job


async def ensure_worktree(workspace: Path, job: str) -> Worktree:
    """The child's worktree, added on first use and reused after a crash."""
    repo = await repository_of(workspace)
    path = worktree_path(workspace, job)
    branch = BRANCH_PREFIX + job
    base_file = path.parent / f"{job}.base"
    await _exclude(repo, workspace)
    if (path / ".git").exists() and base_file.exists():
        return Worktree(path, branch, base_file.read_text(encoding="utf-8").strip())
    base = (await git(repo, "rev-parse", "HEAD")).strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    await git(repo, "worktree", "prune")
    exists = (await git(repo, "branch", "--list", branch)).strip()
    if path.exists() and not (path / ".git").exists():
        raise HabakkukError(f"worktree: {path} exists and is not a git worktree")
    if not path.exists():
        if exists:
            await git(repo, "worktree", "add", str(path), branch)
        else:
            await git(repo, "worktree", "add", "-b", branch, str(path), base)
    base_file.write_text(base + "\n", encoding="utf-8")
    return Worktree(path, branch, base)


async def _exclude(repo: Path, workspace: Path) -> None:
    """List the worktrees folder in the repository's info/exclude (once)."""
    common = Path((await git(repo, "rev-parse", "--git-common-dir")).strip())
    if not common.is_absolute():
        common = repo / common
    relative = (workspace / WORKTREES_DIR).resolve().relative_to(repo.resolve()).as_posix()
    line = f"/{relative}/"
    exclude = common / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if line not in current.splitlines():
        prefix = "" if not current or current.endswith("\n") else "\n"
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write(f"{prefix}{line}\n")


async def commit_worktree(tree: Worktree, message: str) -> WorktreeReport:
    """Commit whatever the child changed to its branch; the branch, base and diff --stat."""
    await git(tree.path, "add", "-A")
    status = (await git(tree.path, "status", "--porcelain")).strip()
    if status:
        await git(tree.path, "commit", "--no-verify", "-q", f"--author={AUTHOR}", "-m", message)
    stat = (await git(tree.path, "diff", "--stat", tree.base_commit, "HEAD")).strip()
    return WorktreeReport(tree.branch, tree.base_commit, stat)
