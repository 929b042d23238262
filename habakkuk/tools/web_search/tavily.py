"""Tavily: POST {base}/search with JSON {query, max_results} and Authorization: Bearer
KEY; the results are results[] (title, url, content)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .http import KeyedProvider
from .types import SearchAnswer, answer, hit, result_dicts

if TYPE_CHECKING:
    import aiohttp


class Tavily(KeyedProvider):
    """The Tavily search API. It bills in credits, not dollars, so no cost is recorded."""

    name = "tavily"
    default_base_url = "https://api.tavily.com"

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        body = await self.request_json(
            http,
            "POST",
            "/search",
            headers={"Authorization": f"Bearer {key or ''}"},
            json_body={"query": query, "max_results": n},
        )
        results = body.get("results") if isinstance(body, dict) else None
        found = result_dicts(self.name, results)
        return answer((hit(r.get("title"), r.get("url"), r.get("content")) for r in found), n)
