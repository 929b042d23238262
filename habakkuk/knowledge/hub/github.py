"""GitHub over its REST API, without git: a ref resolved to a commit, the tarball at it.

GET /repos/{owner}/{repo} gives the default branch when no ref is asked for;
GET /repos/{owner}/{repo}/commits/{ref} resolves a branch, tag or commit to the commit's
SHA; GET /repos/{owner}/{repo}/tarball/{sha} redirects to the archive (codeload), which
holds one top folder `owner-repo-shortsha/`. The API's base URL is
$HABAKKUK_GITHUB_API (default https://api.github.com; tests point it at a fake), and
$GITHUB_TOKEN, when set, is sent as a bearer token (to the API host only).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from habakkuk.knowledge.hub.download import Downloaded, DownloadError, Http

API_ENV = "HABAKKUK_GITHUB_API"
TOKEN_ENV = "GITHUB_TOKEN"
DEFAULT_API = "https://api.github.com"


def api_base() -> str:
    """The GitHub API's base URL, without a trailing slash."""
    return (os.environ.get(API_ENV) or DEFAULT_API).rstrip("/")


class GitHub:
    """The three calls an install makes."""

    def __init__(self, http: Http, *, api: str | None = None, token: str | None = None) -> None:
        self.http = http
        self.api = (api or api_base()).rstrip("/")
        token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        self.headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def _url(self, owner: str, repo: str, *rest: str) -> str:
        tail = "/".join(quote(part, safe="") for part in rest)
        return f"{self.api}/repos/{quote(owner, safe='')}/{quote(repo, safe='')}" + (
            f"/{tail}" if tail else ""
        )

    def _explain(self, exc: DownloadError, what: str) -> DownloadError:
        if exc.status == 404:
            return DownloadError(f"github:{what}: not found (HTTP 404)", 404)
        if exc.status == 422:  # what GitHub answers for a ref it does not know
            return DownloadError(f"github:{what}: no such branch, tag or commit (HTTP 422)", 422)
        if exc.status in (401, 403, 429):
            hint = (
                "" if "Authorization" in self.headers else f"; set {TOKEN_ENV} for a higher limit"
            )
            return DownloadError(
                f"github:{what}: refused (HTTP {exc.status}; rate limit or access){hint}",
                exc.status,
            )
        return exc

    async def default_branch(self, owner: str, repo: str) -> str:
        """The repository's default branch."""
        try:
            data = await self.http.get_json(self._url(owner, repo), headers=self.headers)
        except DownloadError as exc:
            raise self._explain(exc, f"{owner}/{repo}") from None
        branch = data.get("default_branch") if isinstance(data, dict) else None
        if not isinstance(branch, str) or not branch:
            raise DownloadError(f"github:{owner}/{repo}: the API gave no default branch")
        return branch

    async def resolve(self, owner: str, repo: str, ref: str = "") -> str:
        """The commit SHA `ref` (default: the default branch) points at now."""
        ref = ref or await self.default_branch(owner, repo)
        url = f"{self._url(owner, repo)}/commits/{quote(ref, safe='/')}"
        try:
            data = await self.http.get_json(url, headers=self.headers)
        except DownloadError as exc:
            raise self._explain(exc, f"{owner}/{repo}@{ref}") from None
        sha = data.get("sha") if isinstance(data, dict) else None
        if (
            not isinstance(sha, str)
            or len(sha) < 7
            or not all(c in "0123456789abcdef" for c in sha.lower())
        ):
            raise DownloadError(f"github:{owner}/{repo}@{ref}: the API gave no commit SHA")
        return sha.lower()

    async def tarball(self, owner: str, repo: str, sha: str, dest: Path) -> Downloaded:
        """Download the tarball of the commit `sha` to `dest`."""
        try:
            return await self.http.download(
                self._url(owner, repo, "tarball", sha), dest, headers=self.headers
            )
        except DownloadError as exc:
            raise self._explain(exc, f"{owner}/{repo}@{sha}") from None
