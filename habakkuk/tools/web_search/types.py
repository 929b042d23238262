"""What every search provider shares: a hit, an answer, an error, the Protocol."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable

    import aiohttp

TITLE_CHARS = 200
SNIPPET_CHARS = 500


class SearchError(Exception):
    """A search that failed in a way the model should read (one line: which provider,
    and why: a refused key, a rate limit, a timeout, an answer of the wrong shape)."""


@dataclass(frozen=True)
class SearchHit:
    """One result: its title, its address and a snippet of its text (plain text)."""

    title: str
    url: str
    snippet: str = ""


@dataclass(frozen=True)
class SearchAnswer:
    """A provider's results, and the cost in dollars when the provider reported one."""

    hits: list[SearchHit] = field(default_factory=list)
    cost: float | None = None


class SearchProvider(Protocol):
    """One search service, spoken to over HTTP."""

    @property
    def name(self) -> str:
        """brave, tavily, exa, searxng or duckduckgo."""
        ...

    @property
    def key_env(self) -> str | None:
        """The variable its key comes from (None: it takes no key)."""
        ...

    async def search(
        self, http: aiohttp.ClientSession, query: str, n: int, key: str | None
    ) -> SearchAnswer:
        """Up to `n` results for `query`; SearchError when the service fails."""
        ...


class SearchUsage(Protocol):
    """Where each search is recorded (the usage ledger, habakkuk.services.usage)."""

    async def record_search(
        self, provider: str, *, agent: str, session: str, cost: float | None
    ) -> None:
        """One search with `provider` for the agent's session, costing `cost` dollars as
        the provider reported (None: it reports none)."""
        ...


_TAG = re.compile(r"<[^>]*>")


def plain(text: object, limit: int) -> str:
    """A field of a provider's answer as one line of plain text: tags (Brave marks the
    matched words with <strong>) and entities resolved, whitespace collapsed, cut."""
    if not isinstance(text, str):
        return ""
    flat = " ".join(html.unescape(_TAG.sub("", text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def hit(title: object, url: object, snippet: object) -> SearchHit | None:
    """A hit from an answer's fields; None when it has no http(s) URL to cite."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    address = url.strip()
    return SearchHit(plain(title, TITLE_CHARS) or address, address, plain(snippet, SNIPPET_CHARS))


def result_dicts(provider: str, results: object, where: str = "results") -> list[dict[str, Any]]:
    """The objects of an answer's result list (`where` names it in the error); SearchError
    when the answer has no such list."""
    if not isinstance(results, list):
        raise SearchError(f"{provider}: the answer has no {where} list")
    return [item for item in results if isinstance(item, dict)]


def answer(hits: Iterable[SearchHit | None], n: int, cost: float | None = None) -> SearchAnswer:
    """The first `n` of the hits that have an address to cite."""
    return SearchAnswer([h for h in hits if h is not None][:n], cost)
