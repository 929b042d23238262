"""Exa: POST {base}/search with x-api-key and JSON {query, numResults, contents:
{highlights: true}}; the results are results[] (title, url, highlights[] or text), and
costDollars.total is what the request cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .http import request_json
from .types import SearchAnswer, SearchError, hit

if TYPE_CHECKING:
    import aiohttp

BASE_URL = "https://api.exa.ai"


class Exa:
    """The Exa search API, asking for highlights (the passages that match the query)."""

    name = "exa"

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
            headers={"x-api-key": key or ""},
            json_body={"query": query, "numResults": n, "contents": {"highlights": True}},
        )
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise SearchError("exa: the answer has no results list")
        hits = [
            hit(r.get("title"), r.get("url"), _snippet(r)) for r in results if isinstance(r, dict)
        ]
        return SearchAnswer([h for h in hits if h is not None][:n], _cost(body))


def _snippet(result: dict[str, Any]) -> object:
    """The highlights, else the text, else the summary of one result."""
    highlights = result.get("highlights")
    if isinstance(highlights, list):
        joined = " … ".join(h for h in highlights if isinstance(h, str) and h.strip())
        if joined:
            return joined
    for key in ("text", "summary"):
        if isinstance(result.get(key), str) and result[key].strip():
            return result[key]
    return ""


def _cost(body: dict[str, Any]) -> float | None:
    """costDollars.total, when Exa reported it."""
    cost = body.get("costDollars")
    total = cost.get("total") if isinstance(cost, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total >= 0:
        return float(total)
    return None
