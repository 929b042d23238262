"""Tools bound to the services they use, by type: how a toolset above the engine gets them.

The engine cannot name the services of the layers above it (work's board, schedules and
sub-agents, knowledge's memory and skills, the channels' outbox, the tools' background
processes), so it does not carry them: the ToolContext of a call holds only the call
(the agent, session, turn, workspace, mode, approver) and engine services (blobs, bus,
transcripts, state). Each toolset is built above the engine, where its services are
known, as tools that hold their typed service from construction: `ServiceTool[S]` for a
tool working through one service, or a tool's own constructor for more
(`ScheduleCreate(schedules, chats)`, `BackgroundExec(processes, started)`). The runtime
builds them once, with its services (services/toolset.py, `ToolServices`).

So a tool's signature says what it uses, mypy checks every use (no `object` cast back),
and a test builds a tool on a fake of the service's wire, or on a runtime's real service,
and calls it with a plain ToolContext. A toolset built without its service (None)
answers each call with an error result that says so, never a failed turn; a service the
runtime makes after its tools (the channels' outbox) is bound as a function returning
it, or None while there is none.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import HabakkukError
from .permissions import Risk
from .registry import Tool, ToolContext, ToolError, ToolOutput

S = TypeVar("S")


class ServiceTool(Tool, Generic[S]):
    """A tool that works through one service, bound at construction (None: a toolset
    built without it). `unavailable` is what the error says then ("the board is not
    available in this run"); a HabakkukError of the service is an error result."""

    risk: ClassVar[Risk] = Risk.READ
    unavailable: ClassVar[str]

    def __init__(self, service: S | None) -> None:
        self.bound = service

    def service(self) -> S:
        """The bound service; ToolError when the toolset was built without it."""
        if self.bound is None:
            raise ToolError(f"{self.name}: {self.unavailable}")
        return self.bound

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        try:
            return ToolOutput(await self.act(self.service(), args, ctx))
        except HabakkukError as exc:  # NotFound, refusals, bad input: the model reads why
            raise ToolError(f"{self.name}: {exc}") from None

    @abstractmethod
    async def act(self, service: S, args: dict[str, Any], ctx: ToolContext) -> str:
        """Do the work; the text the model reads."""
