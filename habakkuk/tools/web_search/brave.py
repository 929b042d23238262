"""Brave Search: GET {base}/res/v1/web/search?q=&count= with X-Subscription-Token; the
results are web.results[] (title, url, description)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .http import KeyedProvider
from .types import SearchAnswer, answer, hit, result_dicts

if TYPE_CHECKING:
    import aiohttp


class Brave(KeyedProvider):
    """The Brave Search web search API."""

    name = "brave"
    default_base_url = "https://api.search.brave.com"

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        body = await self.request_json(
            http,
            "GET",
            "/res/v1/web/search",
            headers={"X-Subscription-Token": key or "", "Accept": "application/json"},
            params={"q": query, "count": str(n)},
        )
        web = body.get("web") if isinstance(body, dict) else None
        if web is None and isinstance(body, dict) and "query" in body:
            return SearchAnswer()  # no web results at all: Brave leaves the section out
        results = web.get("results") if isinstance(web, dict) else None
        found = result_dicts(self.name, results, "web.results")
        return answer((hit(r.get("title"), r.get("url"), r.get("description")) for r in found), n)
