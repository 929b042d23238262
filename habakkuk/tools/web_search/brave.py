"""Brave Search: GET {base}/res/v1/web/search?q=&count= with X-Subscription-Token; the
results are web.results[] (title, url, description)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .http import request_json
from .types import SearchAnswer, SearchError, hit

if TYPE_CHECKING:
    import aiohttp

BASE_URL = "https://api.search.brave.com"


class Brave:
    """The Brave Search web search API."""

    name = "brave"

    def __init__(self, *, key_env: str, base_url: str | None = None) -> None:
        self.key_env = key_env
        self.base_url = (base_url or BASE_URL).rstrip("/")

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        body = await request_json(
            http,
            self.name,
            "GET",
            f"{self.base_url}/res/v1/web/search",
            key_env=self.key_env,
            headers={"X-Subscription-Token": key or "", "Accept": "application/json"},
            params={"q": query, "count": str(n)},
        )
        web = body.get("web") if isinstance(body, dict) else None
        if web is None and isinstance(body, dict) and "query" in body:
            return SearchAnswer()  # no web results at all: Brave leaves the section out
        results = web.get("results") if isinstance(web, dict) else None
        if not isinstance(results, list):
            raise SearchError("brave: the answer has no web.results list")
        hits = [hit(r.get("title"), r.get("url"), r.get("description")) for r in _dicts(results)]
        return SearchAnswer([h for h in hits if h is not None][:n])


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [item for item in items if isinstance(item, dict)]
