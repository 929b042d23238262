"""Usage: tokens and dollars of the model calls (and the paid generations and web
searches), recorded in usage.db.

Its Protocol, what the surfaces use of it, is engine.llm.usage.UsageAccess.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from habakkuk.engine.llm.types import Usage

if TYPE_CHECKING:
    from habakkuk.engine.config import ModelRef
    from habakkuk.engine.llm.router import Caller
    from habakkuk.engine.llm.usage import UsageStore, UsageTotal
    from habakkuk.tools.generate.types import Generation


class UsageLedger:
    """Records each model call's usage and reports totals (nothing when usage.db is off)."""

    def __init__(self, store: UsageStore | None):
        self.store = store

    async def record(self, ref: ModelRef, caller: Caller, usage: Usage) -> None:
        """The router's `on_usage`: one call's tokens."""
        if self.store is not None:
            await self.store.record(ref, caller, usage)

    async def record_generation(self, generation: Generation) -> None:
        """One paid generation (image, video) in the usage records, as its own kind."""
        if self.store is not None:
            from habakkuk.engine.config import ModelRef
            from habakkuk.engine.llm.router import Caller

            g = generation
            await self.store.record_generation(
                g.kind,
                ModelRef(g.provider, g.model),
                Caller(g.agent, g.session, g.kind),
                g.usage,
                cost=g.cost,
            )

    async def record_search(
        self, provider: str, *, agent: str, session: str, cost: float | None
    ) -> None:
        """One web search in the usage records, as its own kind ("brave/web_search
        [search]"), with the cost the provider reported (None: it reports none)."""
        if self.store is not None:
            from habakkuk.engine.config import ModelRef
            from habakkuk.engine.llm.router import Caller
            from habakkuk.engine.llm.usage import SEARCH_KIND

            caller = Caller(agent, session, SEARCH_KIND)
            ref = ModelRef(provider, "web_search")
            await self.store.record_generation(SEARCH_KIND, ref, caller, Usage(), cost=cost)

    def call_cost(self, model: str, usage: dict[str, Any]) -> float | None:
        """Dollars of one model call ("provider/model" and its usage), None when unpriced."""
        if self.store is None:
            return None
        from habakkuk.engine.config import ModelRef

        known = {k: int(v or 0) for k, v in usage.items() if k in Usage.__dataclass_fields__}
        provider, _, name = model.partition("/")
        return self.store.cost(ModelRef(provider, name), Usage(**known))

    async def usage_totals(
        self, *, days: float | None = None, agent: str | None = None, session: str | None = None
    ) -> list[UsageTotal]:
        """Tokens and dollars by model and agent (over the last `days` when given)."""
        if self.store is None:
            return []
        since = time.time() - days * 86400 if days is not None else None
        return await self.store.totals(since=since, agent=agent, session=session)

    async def usage_since(self, since: float, *, agent: str | None = None) -> list[UsageTotal]:
        """Usage totals by model and agent of the calls at or after `since` (epoch seconds)."""
        if self.store is None:
            return []
        return await self.store.totals(since=since, agent=agent)
