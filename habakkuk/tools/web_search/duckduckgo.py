"""DuckDuckGo's no-script page (POST {base}/html/ with q=), scraped, best effort.

It has no API and no key: the page lists each result as an `a.result__a` whose href is a
redirect (//duckduckgo.com/l/?uddg=<the encoded address>&rut=...) and an element of class
`result__snippet`; ads sit in blocks of class `result--ad`. The page may change, or ask
for a captcha when it sees many automated searches: either is an error result that says
so (and how to configure a provider), never a failed turn.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from .http import request
from .types import SearchAnswer, SearchError, SearchHit, hit

if TYPE_CHECKING:
    import aiohttp

BASE_URL = "https://html.duckduckgo.com"
# A browser-like agent: the page refuses clients that do not look like one.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
PROVIDER_HINT = "configure a search: provider (brave, tavily, exa or searxng) for reliable results"


class DuckDuckGo:
    """DuckDuckGo's HTML page, the search without a `search:` section."""

    name = "duckduckgo"
    key_env = None

    def __init__(self, *, base_url: str | None = None) -> None:
        self.base_url = (base_url or BASE_URL).rstrip("/")

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        reply = await request(
            http,
            self.name,
            "POST",
            f"{self.base_url}/html/",
            headers={"User-Agent": USER_AGENT},
            form={"q": query},
        )
        if reply.status == 202 or "anomaly-modal" in reply.text:
            raise SearchError(
                f"duckduckgo asked for a captcha (it limits automated searches); {PROVIDER_HINT}"
            )
        return SearchAnswer(parse_results(reply.text)[:n])


def parse_results(page: str) -> list[SearchHit]:
    """The organic results of a results page (ads left out); SearchError when the page
    has neither results nor DuckDuckGo's "no results" notice (its layout changed)."""
    parser = _ResultsParser()
    parser.feed(page)
    parser.close()
    if not parser.hits and not parser.saw_links and not parser.no_results:
        raise SearchError(
            "duckduckgo: the results page did not have the expected layout (no result__a "
            f"links): DuckDuckGo may have changed it; {PROVIDER_HINT}"
        )
    return parser.hits


def target(href: str) -> str | None:
    """The address a result link leads to: the uddg parameter of DuckDuckGo's redirect,
    or the href itself when it is a plain http(s) address; None for anything else (an
    ad's y.js link, a relative link)."""
    href = href.strip()
    if href.startswith("//"):
        href = "https:" + href
    parts = urlsplit(href)
    if parts.hostname and parts.hostname.endswith("duckduckgo.com"):
        if parts.path.rstrip("/") != "/l":
            return None
        found = parse_qs(parts.query).get("uddg")
        return found[0] if found and found[0].startswith(("http://", "https://")) else None
    return href if parts.scheme in ("http", "https") and parts.netloc else None


class _ResultsParser(HTMLParser):
    """Walks the page once: a result__a starts a hit, a result__snippet fills it, and
    anything inside a result--ad block is skipped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hits: list[SearchHit] = []
        self.saw_links = False  # any result__a at all (ads included)
        self.no_results = False
        self._ads: list[bool] = []  # one entry per open div: whether it is an ad block
        self._capture: str | None = None  # "title" or "snippet" while inside one
        self._capture_tag = ""
        self._depth = 0  # nesting of _capture_tag inside the captured element
        self._text: list[str] = []
        self._href = ""
        self._pending: tuple[str, str] | None = None  # a title and URL awaiting a snippet

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div":
            self._ads.append("result--ad" in classes)
            if "no-results" in classes:
                self.no_results = True
        if self._capture is not None:
            if tag == self._capture_tag:
                self._depth += 1
            return
        if "result__a" in classes:
            self.saw_links = True
        if any(self._ads):
            return
        if tag == "a" and "result__a" in classes:
            self._flush()
            self._start("title", tag)
            self._href = dict(attrs).get("href") or ""
        elif "result__snippet" in classes and self._pending is not None:
            self._start("snippet", tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._ads:
            self._ads.pop()
        if self._capture is not None and tag == self._capture_tag:
            if self._depth:
                self._depth -= 1
            else:
                self._finish()

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        self._flush()

    def _start(self, what: str, tag: str) -> None:
        self._capture, self._capture_tag, self._depth, self._text = what, tag, 0, []

    def _finish(self) -> None:
        text = "".join(self._text)
        if self._capture == "title":
            address = target(self._href)
            self._pending = (text, address) if address else None
        elif self._capture == "snippet" and self._pending is not None:
            self._add(*self._pending, text)
            self._pending = None
        self._capture = None

    def _flush(self) -> None:
        """A title whose result had no snippet is a hit all the same."""
        if self._pending is not None:
            self._add(*self._pending, "")
            self._pending = None

    def _add(self, title: str, address: str, snippet: str) -> None:
        found = hit(title, address, snippet)
        if found is not None and all(h.url != found.url for h in self.hits):
            self.hits.append(found)
