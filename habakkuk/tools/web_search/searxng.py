"""SearXNG: GET {instance}/search?q=&format=json (no key); the results are results[]
(title, url, content). The instance returns a page of its own size, cut here to n."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .http import request_json
from .types import SearchAnswer, SearchError, answer, hit, result_dicts

if TYPE_CHECKING:
    import aiohttp


class SearXNG:
    """A SearXNG instance's JSON API (its settings must list json among search.formats:
    an instance that does not answers 403)."""

    name = "searxng"
    key_env = None

    def __init__(self, *, url: str) -> None:
        self.url = url.rstrip("/")

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        try:
            body = await request_json(
                http,
                self.name,
                "GET",
                f"{self.url}/search",
                params={"q": query, "format": "json"},
            )
        except SearchError as exc:
            if "(HTTP 403)" in str(exc):
                raise SearchError(
                    f"{exc} (an instance answers 403 when its settings do not enable the json"
                    " format: add json to search.formats in its settings.yml)"
                ) from None
            raise
        results = body.get("results") if isinstance(body, dict) else None
        found = result_dicts(self.name, results)
        return answer((hit(r.get("title"), r.get("url"), r.get("content")) for r in found), n)
