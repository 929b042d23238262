"""Fake web search APIs on 127.0.0.1, each checking requests as the real service does.

One `FakeSearchApi(provider)` serves one provider's documented endpoint:

- brave: GET /res/v1/web/search?q=&count= with X-Subscription-Token; answers
  {"type": "search", "query": {...}, "web": {"results": [{title, url, description}]}}
  (descriptions mark matched words with <strong>, as Brave does); 401 with Brave's
  ErrorResponse for a wrong token, 422 for a missing q or a count outside 1-20;
- tavily: POST /search, JSON {query, max_results}, Authorization: Bearer KEY; answers
  {"query", "results": [{title, url, content, score, raw_content}], "response_time", ...};
  401 {"detail": {"error": ...}} for a wrong key, 400 for a body without a query;
- exa: POST /search, x-api-key, JSON {query, numResults, contents}; answers {"requestId",
  "results": [{id, title, url, highlights, highlightScores}], "costDollars": {"total"}}
  (text instead of highlights unless contents asks for highlights);
- searxng: GET /search?q=&format=json (no key); answers its JSON page, or 403 when the
  instance does not enable the json format (`json_enabled = False`), as SearXNG does;
- duckduckgo: POST /html/ with the form field q; answers the no-script results page:
  an ad block first (class result--ad, its link to duckduckgo.com/y.js), then organic
  results whose links are //duckduckgo.com/l/?uddg=<encoded address>&rut=... redirects,
  or the "No results." block; `page` replaces the page (a layout change, a captcha).

A test sets `hits` (title, url, snippet), or `status` and `body` to answer otherwise,
and reads `requests`. `hang` never answers (for timeouts).
"""

from __future__ import annotations

import asyncio
import html
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import quote

from aiohttp import web

from tests.fakes.loopback import serve_on_loopback

KEY = "search-test-key"


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class SeenRequest:
    """One request the fake received (header names lower-case)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)


class FakeSearchApi:
    """One search provider's API (see the module docstring); `async with` starts it."""

    def __init__(self, provider: str, *, key: str = KEY) -> None:
        self.provider = provider
        self.key = key
        self.hits: list[Hit] = []
        self.status: int | None = None  # answer this status with `body` instead
        self.body = ""
        self.headers: dict[str, str] = {}  # sent with that status (Retry-After)
        self.page: str | None = None  # duckduckgo: this page instead of the built one
        self.cost: float | None = 0.007  # exa's costDollars.total (None: left out)
        self.json_enabled = True  # searxng: whether the instance serves format=json
        self.hang = False  # never answer (the client's timeout ends the call)
        self.requests: list[SeenRequest] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        routes = {
            "brave": ("GET", "/res/v1/web/search", self._brave),
            "tavily": ("POST", "/search", self._tavily),
            "exa": ("POST", "/search", self._exa),
            "searxng": ("GET", "/search", self._searxng),
            "duckduckgo": ("POST", "/html/", self._duckduckgo),
        }
        method, path, handler = routes[self.provider]
        app.router.add_route(method, path, self._recorded(handler))
        self._runner, self.port = await serve_on_loopback(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeSearchApi:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _recorded(self, handler: Any) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            body: Any = None
            form: dict[str, str] = {}
            if request.content_type == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    body = None
            elif request.content_type == "application/x-www-form-urlencoded":
                form = {k: str(v) for k, v in (await request.post()).items()}
            self.requests.append(
                SeenRequest(
                    request.method,
                    request.path,
                    dict(request.query),
                    {k.lower(): v for k, v in request.headers.items()},
                    body,
                    form,
                )
            )
            if self.hang:
                await asyncio.Event().wait()  # until the server shuts down
            if self.status is not None:
                return web.Response(status=self.status, text=self.body, headers=self.headers)
            response: web.StreamResponse = await handler(request, body, form)
            return response

        return handle

    # -- the providers ---------------------------------------------------------------

    async def _brave(self, request: web.Request, body: Any, form: Any) -> web.Response:
        if request.headers.get("X-Subscription-Token") != self.key:
            return web.json_response(
                {
                    "type": "ErrorResponse",
                    "error": {
                        "id": "b5f0c1d2",
                        "status": 401,
                        "code": "SUBSCRIPTION_TOKEN_INVALID",
                        "detail": "The provided subscription token is invalid.",
                    },
                    "time": 1765000000,
                },
                status=401,
            )
        query = request.query.get("q", "")
        count = request.query.get("count", "20")
        if not query or not count.isdigit() or not 1 <= int(count) <= 20:
            return web.json_response(
                {"type": "ErrorResponse", "error": {"status": 422, "code": "VALIDATION"}},
                status=422,
            )
        results = [
            {
                "title": hit.title,
                "url": hit.url,
                "is_source_local": False,
                "is_source_both": False,
                "description": _brave_marked(hit.snippet, query),
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
                "subtype": "generic",
                "meta_url": {"scheme": "https", "netloc": hit.url.split("/")[2], "path": ""},
            }
            for hit in self.hits[: int(count)]
        ]
        answer: dict[str, Any] = {
            "type": "search",
            "query": {"original": query, "more_results_available": False},
            "mixed": {"type": "mixed", "main": [], "top": [], "side": []},
        }
        if results:  # Brave leaves the web section out when nothing matched
            answer["web"] = {"type": "search", "results": results, "family_friendly": True}
        return web.json_response(answer)

    async def _tavily(self, request: web.Request, body: Any, form: Any) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.key}":
            return web.json_response(
                {"detail": {"error": "Unauthorized: missing or invalid API key."}}, status=401
            )
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return web.json_response({"detail": {"error": "query is required"}}, status=400)
        limit = body.get("max_results", 5)
        if not isinstance(limit, int) or not 0 <= limit <= 20:
            return web.json_response({"detail": {"error": "max_results: 0-20"}}, status=400)
        results = [
            {
                "title": hit.title,
                "url": hit.url,
                "content": hit.snippet,
                "score": round(0.9 - i * 0.05, 2),
                "raw_content": None,
            }
            for i, hit in enumerate(self.hits[:limit])
        ]
        return web.json_response(
            {
                "query": body["query"],
                "follow_up_questions": None,
                "answer": None,
                "images": [],
                "results": results,
                "response_time": 0.84,
                "request_id": "123e4567-e89b-12d3-a456-426614174111",
            }
        )

    async def _exa(self, request: web.Request, body: Any, form: Any) -> web.Response:
        if request.headers.get("x-api-key") != self.key:
            return web.json_response(
                {"requestId": "r1", "error": "Invalid API key", "tag": "INVALID_API_KEY"},
                status=401,
            )
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return web.json_response({"error": "query is required"}, status=400)
        limit = body.get("numResults", 10)
        contents = body.get("contents") or {}
        results = []
        for hit in self.hits[: int(limit)]:
            item: dict[str, Any] = {
                "id": hit.url,
                "title": hit.title,
                "url": hit.url,
                "publishedDate": "2026-10-07T00:00:00.000Z",
                "author": None,
            }
            if contents.get("highlights"):
                item["highlights"] = [hit.snippet]
                item["highlightScores"] = [0.42]
            else:
                item["text"] = hit.snippet
            results.append(item)
        answer: dict[str, Any] = {
            "requestId": "b5947044c4b78efa9552a7c89b306d95",
            "resolvedSearchType": "neural",
            "searchType": "auto",
            "results": results,
        }
        if self.cost is not None:
            answer["costDollars"] = {"total": self.cost, "search": {"neural": self.cost}}
        return web.json_response(answer)

    async def _searxng(self, request: web.Request, body: Any, form: Any) -> web.Response:
        if request.query.get("format") != "json":
            return web.Response(
                text="<!DOCTYPE html><html>results page</html>", content_type="text/html"
            )
        if not self.json_enabled:
            return web.Response(status=403, text="Forbidden", content_type="text/plain")
        query = request.query.get("q", "")
        results = [
            {
                "url": hit.url,
                "title": hit.title,
                "content": hit.snippet,
                "engine": "duckduckgo",
                "parsed_url": ["https", hit.url.split("/")[2], "/", "", "", ""],
                "template": "default.html",
                "engines": ["duckduckgo", "brave"],
                "positions": [i + 1],
                "score": 2.0 / (i + 1),
                "category": "general",
            }
            for i, hit in enumerate(self.hits)
        ]
        return web.json_response(
            {
                "query": query,
                "number_of_results": 0,
                "results": results,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    async def _duckduckgo(
        self, request: web.Request, body: Any, form: dict[str, str]
    ) -> web.Response:
        if self.page is not None:
            return web.Response(text=self.page, content_type="text/html")
        query = form.get("q", "")
        return web.Response(text=duckduckgo_page(query, self.hits), content_type="text/html")


def _brave_marked(snippet: str, query: str) -> str:
    """A description as Brave writes it: matched words in <strong>, entities escaped."""
    words = {w.lower() for w in query.split()}
    return " ".join(
        f"<strong>{html.escape(w)}</strong>" if w.lower() in words else html.escape(w)
        for w in snippet.split()
    )


def duckduckgo_page(query: str, hits: list[Hit]) -> str:
    """DuckDuckGo's no-script results page, in the shape it is served (saved and trimmed):
    the search form, an ad, the organic results (redirect links, an icon, the shown
    address, the snippet with matched words in <b>), the next-page form."""
    q = html.escape(query, quote=True)
    words = {w.lower() for w in query.split()}
    parts = [
        '<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">\n<html>\n<head>\n'
        '<meta http-equiv="content-type" content="text/html; charset=UTF-8">\n'
        '<meta name="referrer" content="origin">\n'
        f"<title>{q} at DuckDuckGo</title>\n"
        '<link rel="stylesheet" href="/dist/h.b8d4c1f3d2a1e7b8c9f0.css" type="text/css">\n'
        "</head>\n<body>\n"
        '<div class="header url">\n<form name="x" id="search_form" action="/html/" method="post">\n'
        f'<input type="text" name="q" class="search__input" value="{q}">\n'
        '<input type="submit" class="search__button" value="S">\n</form>\n</div>\n'
        '<div class="filters"><div class="frm__select">...</div></div>\n'
        '<div id="links" class="results">\n'
        '<div class="result results_links results_links_deep result--ad ">\n'
        '<div class="links_main links_deep result__body">\n<h2 class="result__title">\n'
        '<a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_domain='
        'shop.example&amp;ad_provider=bingv7aa&amp;u3=https%3A%2F%2Fshop.example%2F">'
        "Buy Everything Today - Official Shop</a>\n</h2>\n"
        '<a class="result__snippet" href="https://duckduckgo.com/y.js?ad_domain=shop.example">'
        "Sponsored: the best deals.</a>\n"
        '<div class="result__extras"><span class="badge--ad">Ad</span></div>\n'
        "</div>\n</div>\n",
    ]
    if not hits:
        parts.append(
            '<div class="result results_links results_links_deep result--no-result">\n'
            '<div class="no-results">No results.</div>\n</div>\n'
        )
    for hit in hits:
        link = f"//duckduckgo.com/l/?uddg={quote(hit.url, safe='')}&amp;rut=5f1d0e9a7c"
        snippet = " ".join(
            f"<b>{html.escape(w)}</b>" if w.lower() in words else html.escape(w)
            for w in hit.snippet.split()
        )
        shown = html.escape(hit.url.split("://", 1)[-1])
        parts.append(
            '<div class="result results_links results_links_deep web-result ">\n'
            '<div class="links_main links_deep result__body">\n'
            '<h2 class="result__title">\n'
            f'<a rel="nofollow" class="result__a" href="{link}">{html.escape(hit.title)}</a>\n'
            "</h2>\n"
            '<div class="result__extras">\n<div class="result__extras__url">\n'
            f'<span class="result__icon"><a rel="nofollow" href="{link}">'
            '<img class="result__icon__img" width="16" height="16" alt=""'
            ' src="//external-content.duckduckgo.com/ip3/x.ico" name="i15"></a></span>\n'
            f'<a class="result__url" href="{link}">{shown}</a>\n'
            "</div>\n</div>\n"
            f'<a class="result__snippet" href="{link}">{snippet}</a>\n'
            '<div class="clear"></div>\n</div>\n</div>\n'
        )
    parts.append(
        '<div class="nav-link">\n<form action="/html/" method="post">\n'
        '<input type="submit" class="btn btn--alt" value="Next">\n'
        f'<input type="hidden" name="q" value="{q}">\n<input type="hidden" name="s" value="10">\n'
        "</form>\n</div>\n</div>\n</body>\n</html>\n"
    )
    return "".join(parts)


def brave_config(fake: FakeSearchApi) -> str:
    """The `search:` section pointing brave at `fake` (YAML, at the top level)."""
    return f"search:\n  provider: brave\n  base_url: {fake.base_url}\n"
