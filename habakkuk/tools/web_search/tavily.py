"""Tavily: POST {base}/search with JSON {query, max_results} and Authorization: Bearer
KEY; the results are results[] (title, url, content)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .http import request_json
from .types import SearchAnswer, SearchError, hit

if TYPE_CHECKING:
    import aiohttp

BASE_URL = "https://api.tavily.com"


class Tavily:
    """The Tavily search API. It bills in credits, not dollars, so no cost is recorded."""

    name = "tavily"

    def __init__(self, *, key_env: str, base_url: str | None = None) -> None:
        self.key_env = key_env
        self.base_url = (base_url or BASE_URL).rstrip("/")

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        body = await request_json(
            http,
            self.name,
            "POST",
            f"{self.base_url}/search",
            key_env=self.key_env,
            headers={"Authorization": f"Bearer {key or ''}"},
            json_body={"query": query, "max_results": n},
        )
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise SearchError("tavily: the answer has no results list")
        hits = [
            hit(r.get("title"), r.get("url"), r.get("content"))
            for r in results
            if isinstance(r, dict)
        ]
        return SearchAnswer([h for h in hits if h is not None][:n])
