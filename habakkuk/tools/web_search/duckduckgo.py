"""DuckDuckGo's no-script page (POST {base}/html/ with q=), scraped, best effort.

It has no API and no key: the page lists each result as an `a.result__a` whose href is a
redirect (//duckduckgo.com/l/?uddg=<the encoded address>&rut=...) and an element of class
`result__snippet`; ads sit in blocks of class `result--ad`. The page may change, or ask
for a captcha when it sees many automated searches: either is an error result that says
so (and how to configure a provider), never a failed turn. The page is read by
duckduckgo_page.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .http import request
from .types import SearchAnswer, SearchError

if TYPE_CHECKING:
    import aiohttp

BASE_URL = "https://html.duckduckgo.com"
# A browser-like agent: the page refuses clients that do not look like one.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


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
        # html.parser, which reads the page, is loaded by the first search, not at start.
        from .duckduckgo_page import PROVIDER_HINT, parse_results

        if reply.status == 202 or "anomaly-modal" in reply.text:
            raise SearchError(
                f"duckduckgo asked for a captcha (it limits automated searches); {PROVIDER_HINT}"
            )
        return SearchAnswer(parse_results(reply.text)[:n])
