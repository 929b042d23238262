"""A tool that works through one service the runtime hands the turn (ToolContext field),
and turns the service's HabakkukError into an error result, never a failed turn."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import HabakkukError
from .permissions import Risk
from .registry import Tool, ToolContext, ToolError, ToolOutput

S = TypeVar("S")


class ServiceTool(Tool, Generic[S]):
    """`service_field` names the ToolContext field that holds the service (None in a run
    without it); `service_name` is how the error says it is missing."""

    risk: ClassVar[Risk] = Risk.READ
    service_field: ClassVar[str]
    service_name: ClassVar[str]

    def service(self, ctx: ToolContext) -> S:
        """The service from the context; ToolError when this run has none."""
        found = getattr(ctx, self.service_field, None)
        if found is None:
            raise ToolError(f"{self.name}: {self.service_name} is not available in this run")
        return found  # type: ignore[no-any-return]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            return ToolOutput(await self.act(self.service(ctx), args, ctx))
        except HabakkukError as exc:  # NotFound, refusals, bad input: the model reads why
            raise ToolError(f"{self.name}: {exc}") from None

    @abstractmethod
    async def act(self, service: S, args: dict[str, Any], ctx: ToolContext) -> str:
        """Do the work; the text the model reads."""
