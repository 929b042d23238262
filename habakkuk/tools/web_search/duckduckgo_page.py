"""DuckDuckGo's no-script results page, read: each organic result's title, real address
and snippet (ads left out), or an error when the page no longer has the expected layout."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

from .types import SearchError, SearchHit, hit

PROVIDER_HINT = "configure a search: provider (brave, tavily, exa or searxng) for reliable results"


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
