"""Exa: POST {base}/search with x-api-key and JSON {query, numResults, contents:
{highlights: true}}; the results are results[] (title, url, highlights[] or text), and
costDollars.total is what the request cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .http import KeyedProvider
from .types import SearchAnswer, answer, hit, result_dicts

if TYPE_CHECKING:
    import aiohttp


class Exa(KeyedProvider):
    """The Exa search API, asking for highlights (the passages that match the query)."""

    name = "exa"
    default_base_url = "https://api.exa.ai"

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        body = await self.request_json(
            http,
            "POST",
            "/search",
            headers={"x-api-key": key or ""},
            json_body={"query": query, "numResults": n, "contents": {"highlights": True}},
        )
        results = body.get("results") if isinstance(body, dict) else None
        found = result_dicts(self.name, results)
        return answer(
            (hit(r.get("title"), r.get("url"), _snippet(r)) for r in found), n, _cost(body)
        )


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
