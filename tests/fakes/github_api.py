"""A fake GitHub REST API (and plain file host) on 127.0.0.1, speaking the real endpoints.

- GET /repos/{owner}/{repo}: {"full_name", "default_branch", ...}, or 404 {"message":
  "Not Found"} as GitHub answers;
- GET /repos/{owner}/{repo}/commits/{ref}: the commit a branch, tag or (full or short)
  SHA points at, {"sha", "commit": {...}}; 422 "No commit found for SHA: ..." otherwise;
- GET /repos/{owner}/{repo}/tarball/{ref}: 302 to /codeload/{owner}/{repo}/legacy.tar.gz/
  {sha}, which sends a gzip tarball with GitHub's layout: a pax global header carrying
  the commit, then one top folder `{owner}-{repo}-{sha[:7]}/`;
- GET /files/{name}: bytes a test put there (a registry index, a SKILL.md, an archive).

Tests push commits (`push`), move branches by pushing again, replace a commit's
tarball with crafted bytes (`set_tarball`, for symlinks and bombs), and read
`requests` (method, path, Authorization). `ThreadedGitHub` runs it on its own loop in a
thread for tests that call the synchronous CLI.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType

from aiohttp import web

from tests.fakes.loopback import Threaded, serve_on_loopback


@dataclass
class Commit:
    sha: str
    files: dict[str, bytes]
    tarball: bytes | None = None  # crafted bytes instead of the files' tarball


@dataclass
class Repo:
    owner: str
    name: str
    default_branch: str = "main"
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> sha
    commits: dict[str, Commit] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    authorization: str | None


def github_tarball(owner: str, repo: str, sha: str, files: dict[str, bytes]) -> bytes:
    """A tarball laid out as GitHub's: pax global header with the commit, one top folder."""
    out = io.BytesIO()
    top = f"{owner}-{repo}-{sha[:7]}"
    with tarfile.open(
        fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": sha}
    ) as tar:
        folders: set[str] = set()
        for path in sorted(files):
            parts = path.split("/")
            for depth in range(len(parts)):
                folder = "/".join([top, *parts[:depth]])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o775
                    tar.addfile(info)
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size = len(files[path])
            info.mode = 0o755 if path.endswith(".sh") else 0o664
            tar.addfile(info, io.BytesIO(files[path]))
    return out.getvalue()


class FakeGitHub:
    """The fake server; `base_url` is what HABAKKUK_GITHUB_API points at."""

    def __init__(self, *, codeload_host: str = "127.0.0.1") -> None:
        # The host the tarball endpoint redirects to: "localhost" makes it another host
        # than the API's, as codeload.github.com is.
        self.codeload_host = codeload_host
        self.repos: dict[tuple[str, str], Repo] = {}
        self.files: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.requests: list[Seen] = []
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def file_url(self, name: str) -> str:
        return f"{self.base_url}/files/{name}"

    # -- what tests set up ----------------------------------------------------------

    def push(
        self,
        owner: str,
        repo: str,
        files: Mapping[str, str | bytes],
        *,
        branch: str = "main",
        tag: str | None = None,
    ) -> str:
        """A new commit holding exactly `files` on `branch` (created as needed); its SHA."""
        found = self.repos.setdefault((owner, repo), Repo(owner, repo))
        data = {p: (v.encode() if isinstance(v, str) else v) for p, v in files.items()}
        digest = hashlib.sha1(f"{owner}/{repo}:{len(found.commits)}".encode())
        for path in sorted(data):
            digest.update(path.encode() + b"\0" + data[path])
        sha = digest.hexdigest()
        found.commits[sha] = Commit(sha, data)
        found.refs[branch] = sha
        if tag:
            found.refs[tag] = sha
        return sha

    def set_tarball(self, owner: str, repo: str, sha: str, tarball: bytes) -> None:
        """Serve crafted bytes as the tarball of an existing commit."""
        self.repos[(owner, repo)].commits[sha].tarball = tarball

    def redirect_file(self, name: str, location: str) -> str:
        """Answer /files/NAME with a 302 to `location`; the URL."""
        self.redirects[name] = location
        return self.file_url(name)

    def serve_file(self, name: str, data: str | bytes) -> str:
        """Put bytes at /files/NAME; the URL."""
        self.files[name] = data.encode() if isinstance(data, str) else data
        return self.file_url(name)

    # -- the endpoints --------------------------------------------------------------

    def _record(self, request: web.Request) -> None:
        self.requests.append(
            Seen(request.method, request.path, request.headers.get("Authorization"))
        )

    def _repo(self, request: web.Request) -> Repo:
        key = (request.match_info["owner"], request.match_info["repo"])
        if key not in self.repos:
            raise web.HTTPNotFound(
                text='{"message": "Not Found", "status": "404"}', content_type="application/json"
            )
        return self.repos[key]

    def _commit(self, repo: Repo, ref: str) -> Commit:
        sha = repo.refs.get(ref)
        if sha is None:
            matches = [s for s in repo.commits if len(ref) >= 7 and s.startswith(ref.lower())]
            sha = matches[0] if len(matches) == 1 else None
        if sha is None:
            raise web.HTTPUnprocessableEntity(
                text=f'{{"message": "No commit found for SHA: {ref}", "status": "422"}}',
                content_type="application/json",
            )
        return repo.commits[sha]

    async def _repo_info(self, request: web.Request) -> web.Response:
        self._record(request)
        repo = self._repo(request)
        return web.json_response(
            {
                "name": repo.name,
                "full_name": f"{repo.owner}/{repo.name}",
                "default_branch": repo.default_branch,
                "private": False,
            }
        )

    async def _commits(self, request: web.Request) -> web.Response:
        self._record(request)
        repo = self._repo(request)
        commit = self._commit(repo, request.match_info["ref"])
        return web.json_response(
            {"sha": commit.sha, "commit": {"message": "a commit", "tree": {"sha": commit.sha}}}
        )

    async def _tarball(self, request: web.Request) -> web.Response:
        self._record(request)
        repo = self._repo(request)
        commit = self._commit(repo, request.match_info["ref"])
        location = (
            f"http://{self.codeload_host}:{self._port}"
            f"/codeload/{repo.owner}/{repo.name}/legacy.tar.gz/{commit.sha}"
        )
        raise web.HTTPFound(location)

    async def _codeload(self, request: web.Request) -> web.Response:
        self._record(request)
        repo = self._repo(request)
        commit = self._commit(repo, request.match_info["sha"])
        body = commit.tarball or github_tarball(repo.owner, repo.name, commit.sha, commit.files)
        return web.Response(body=body, content_type="application/x-gzip")

    async def _file(self, request: web.Request) -> web.Response:
        self._record(request)
        name = request.match_info["name"]
        if name in self.redirects:
            raise web.HTTPFound(self.redirects[name])
        if name not in self.files:
            raise web.HTTPNotFound()
        return web.Response(body=self.files[name], content_type="application/octet-stream")

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/repos/{owner}/{repo}", self._repo_info)
        app.router.add_get("/repos/{owner}/{repo}/commits/{ref:.+}", self._commits)
        app.router.add_get("/repos/{owner}/{repo}/tarball/{ref:.+}", self._tarball)
        app.router.add_get("/codeload/{owner}/{repo}/legacy.tar.gz/{sha}", self._codeload)
        app.router.add_get("/files/{name}", self._file)
        self._runner, self._port = await serve_on_loopback(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeGitHub:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class ThreadedGitHub(Threaded[FakeGitHub]):
    """A FakeGitHub on its own loop in a daemon thread (for the synchronous CLI)."""

    def __init__(self) -> None:
        super().__init__(FakeGitHub())
