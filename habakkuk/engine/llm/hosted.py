"""The providers' hosted web tools (spec 000 "Models": hosted web search and fetch).

Where the model supports them and the agent's `web:` is on (the default), the
adapter declares the provider's own web search, and fetch where there is one,
beside our function tools. Which models have them is `SUPPORT`, one table by
adapter kind and model prefix; a model the table does not know gets none, and
Chat Completions and litellm never do (our fetch_url serves them). A model the
provider refuses the tools for answers 400: `explain` adds that `web: false`
turns them off.

Their call and result blocks come back as OpaqueBlocks (provider = the adapter
kind, data = the block as the API sent it), replayed verbatim only to an
adapter of the same kind (each adapter filters on its kind); compaction and
exports show them as `describe` says ("[web search: QUERY]").

A hosted tool and one of ours must not share a name (Anthropic answers 400 to
two tools named web_search): `offered` is the one rule that drops our function
tool of that name, applied by each adapter where it builds the request's tool
list for the model the router chose (the turn does not know which model of the
chain answers). It works whether or not such a function tool exists.

`pause_turn`: Anthropic stops a long hosted-tool turn with it; the turn stores
the paused message as it came plus `PAUSE_MARK` (replayed to no provider: its
kind is none of theirs), so a turn resumed after a crash still knows to send
the conversation again rather than take the paused text as the reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .pricing import normalise
from .provider import ProviderError
from .types import Message, OpaqueBlock, ToolSpec

SEARCH_NAME = "web_search"
FETCH_NAME = "web_fetch"
# Uses of each hosted tool the provider may make in one request (a bound on cost).
MAX_USES = 5
# Anthropic's fetch puts the whole page in the context; this caps it (tokens).
FETCH_MAX_CONTENT_TOKENS = 50_000


@dataclass(frozen=True)
class HostedWeb:
    """Which hosted web tools one request declares."""

    search: bool = False
    fetch: bool = False

    @property
    def names(self) -> frozenset[str]:
        """The tool names the declared hosted tools take."""
        taken = set()
        if self.search:
            taken.add(SEARCH_NAME)
        if self.fetch:
            taken.add(FETCH_NAME)
        return frozenset(taken)

    def __bool__(self) -> bool:
        return self.search or self.fetch


NONE = HostedWeb()
SEARCH = HostedWeb(search=True)
SEARCH_AND_FETCH = HostedWeb(search=True, fetch=True)

# Adapter kind -> (model prefix, what it has); the longest matching prefix wins, so an
# exception (a model of a family without them) is a longer prefix with NONE. Model ids
# are compared as pricing.normalise spells them (gateway prefixes gone, dots as dashes).
SUPPORT: dict[str, tuple[tuple[str, HostedWeb], ...]] = {
    # Anthropic's server tools: Claude 3.7 Sonnet, 3.5 Haiku and every 4.x and later
    # model (named claude-opus-*, claude-sonnet-*, claude-haiku-* from 4 on).
    "anthropic": (
        ("claude-opus-", SEARCH_AND_FETCH),
        ("claude-sonnet-", SEARCH_AND_FETCH),
        ("claude-haiku-", SEARCH_AND_FETCH),
        ("claude-3-7-sonnet", SEARCH_AND_FETCH),
        ("claude-3-5-haiku", SEARCH_AND_FETCH),
    ),
    # OpenAI Responses' web_search (it opens pages itself: no separate fetch tool).
    "responses": (
        ("gpt-5", SEARCH),
        ("gpt-4o", SEARCH),
        ("gpt-4-1", SEARCH),
        ("gpt-4-1-nano", NONE),
        ("o3", SEARCH),
        ("o3-mini", NONE),
        ("o4-mini", SEARCH),
    ),
}


def _matches(name: str, prefix: str) -> bool:
    if prefix.endswith("-"):
        return name.startswith(prefix)
    return name == prefix or name.startswith(prefix + "-")


def hosted_web(kind: str, model: str, wanted: bool) -> HostedWeb:
    """The hosted web tools a request to `model` through an adapter of `kind` declares
    (none when the agent turned them off, or the model has none)."""
    return _support(kind, model) if wanted else NONE


@lru_cache(maxsize=1024)  # asked at every request; the table is fixed
def _support(kind: str, model: str) -> HostedWeb:
    name = normalise(model)
    found = [(len(p), web) for p, web in SUPPORT.get(kind, ()) if _matches(name, p)]
    return max(found, key=lambda f: f[0])[1] if found else NONE


def offered(tools: list[ToolSpec], web: HostedWeb) -> list[ToolSpec]:
    """Our function tools to declare beside `web`: any whose name a hosted tool takes
    is left out (the provider's own tool answers in its place)."""
    taken = web.names
    if not taken or not any(t.name in taken for t in tools):
        return tools
    return [t for t in tools if t.name not in taken]


def explain(error: ProviderError, web: HostedWeb) -> ProviderError:
    """`error` with the way out added when the provider refused the hosted tools."""
    if not web or error.error_class != "bad_request":
        return error
    message = str(error.args[0]) if error.args else ""
    lowered = message.lower()
    if not any(word in lowered for word in (SEARCH_NAME, FETCH_NAME, "server tool", "web search")):
        return error
    hint = (
        f"{message} (the provider's hosted web tools were offered to this model: "
        "set `web: false` on the agent to turn them off)"
    )
    return ProviderError(
        "bad_request",
        hint,
        status=error.status,
        retry_after=error.retry_after,
        provider=error.provider,
    )


# -- pause_turn ---------------------------------------------------------------------

PAUSE_STOP = "pause_turn"
# The kind of the mark: no adapter's, so none replays it.
HABAKKUK = "habakkuk"


def pause_mark() -> OpaqueBlock:
    """The block the turn adds to a message the provider paused."""
    return OpaqueBlock(HABAKKUK, {"type": PAUSE_STOP})


def is_paused(message: Message) -> bool:
    """Whether `message` is an assistant message the provider paused (see the module)."""
    return message.role == "assistant" and any(
        isinstance(b, OpaqueBlock) and b.provider == HABAKKUK and b.data.get("type") == PAUSE_STOP
        for b in message.blocks
    )


def is_hosted(block: object) -> bool:
    """Whether `block` came from a provider's hosted tool (its results taint the turn)."""
    return isinstance(block, OpaqueBlock) and block.provider != HABAKKUK


# -- placeholders -------------------------------------------------------------------

_CUT = 200


def _short(text: object) -> str:
    value = " ".join(str(text).split())
    return value if len(value) <= _CUT else value[: _CUT - 1] + "…"


def _search_results(content: Any) -> str:
    if isinstance(content, dict):  # an error object
        return f"[web search failed: {_short(content.get('error_code', 'error'))}]"
    if not isinstance(content, list):
        return "[web search results]"
    found = [
        f"{_short(r.get('title') or r.get('url', ''))} <{r.get('url', '')}>"
        for r in content
        if isinstance(r, dict)
    ]
    if not found:
        return "[web search results: none]"
    return "[web search results: " + "; ".join(found[:10]) + "]"


def _fetch_result(content: Any) -> str:
    if not isinstance(content, dict):
        return "[web page fetched]"
    if content.get("type") == "web_fetch_tool_result_error":
        return f"[web fetch failed: {_short(content.get('error_code', 'error'))}]"
    return f"[web page fetched: {_short(content.get('url', ''))}]"


def _responses_call(action: Any) -> str:
    if not isinstance(action, dict):
        return "[web search]"
    kind = action.get("type")
    if kind == "open_page":
        return f"[web page opened: {_short(action.get('url', ''))}]"
    if kind == "find_in_page":
        return f"[find in page: {_short(action.get('pattern', ''))} <{action.get('url', '')}>]"
    queries = action.get("queries") or [action.get("query", "")]
    return "[web search: " + "; ".join(_short(q) for q in queries if q) + "]"


def describe(block: OpaqueBlock) -> str:
    """A one-line placeholder of a hosted tool's block for summaries and exports
    ("" for the pause mark, which shows nothing)."""
    data = block.data
    kind = data.get("type")
    if block.provider == HABAKKUK:
        return ""
    if kind == "server_tool_use":
        tool = data.get("name", "")
        given = data.get("input")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        if tool == SEARCH_NAME:
            return f"[web search: {_short(args.get('query', ''))}]"
        if tool == FETCH_NAME:
            return f"[web fetch: {_short(args.get('url', ''))}]"
        return f"[{_short(tool or 'server tool')}]"
    if kind == "web_search_tool_result":
        return _search_results(data.get("content"))
    if kind == "web_fetch_tool_result":
        return _fetch_result(data.get("content"))
    if kind == "web_search_call":
        return _responses_call(data.get("action"))
    return f"[{block.provider or 'provider'} {_short(kind or 'block')}]"


def _label(title: str) -> str:
    # Brackets would end the link text early.
    return _short(title).replace("[", "(").replace("]", ")")


SOURCES_HEAD = "\n\nSources:\n"


def without_sources(text: str) -> str:
    """`text` without the Sources note an adapter appended (for an answer whose JSON
    must come last: a sub-turn's output_schema)."""
    head, found, tail = text.rpartition(SOURCES_HEAD)
    if found and all(line.startswith("- [") for line in tail.splitlines()):
        return head
    return text


def sources_note(citations: list[tuple[str, str]]) -> str:
    """The sources the model cited, as a list of links to append to its text ("" for none).

    `citations` are (url, title) pairs in the order cited; each URL is listed once."""
    seen: dict[str, str] = {}
    for url, title in citations:
        if url and url not in seen:
            seen[url] = title
    if not seen:
        return ""
    lines = [f"- [{_label(title) or url}]({url})" for url, title in seen.items()]
    return SOURCES_HEAD + "\n".join(lines)
