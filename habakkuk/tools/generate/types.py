"""What the generation tools and their providers pass each other: typed values, and the
Protocols of the two kinds of provider.

A provider either answers in the request itself (`ImageMaker`: OpenAI and Gemini images)
or runs a job that is polled (`JobProvider`: fal's queue, OpenAI's videos, Gemini's Veo
operations). Only a job can be resumed after a crash: its id is recorded before the
first poll (journal.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from habakkuk.engine.llm.types import Usage

Kind = Literal["image", "video"]


class GenerationError(Exception):
    """A provider refused or failed the request; the message is one line for the model
    (the provider's own words where it gave some, never a key)."""


class TransientError(GenerationError):
    """A poll that may work when tried again (a 5xx, a 429, a dropped connection)."""


@dataclass(frozen=True)
class InputImage:
    """An image the request starts from (edit_from, video_generate's image)."""

    data: bytes
    media_type: str
    name: str


@dataclass(frozen=True)
class ImageRequest:
    prompt: str
    size: str  # WIDTHxHEIGHT or auto
    n: int
    edit_from: InputImage | None = None


@dataclass(frozen=True)
class VideoRequest:
    prompt: str
    seconds: int
    size: str  # WIDTHxHEIGHT
    image: InputImage | None = None


@dataclass(frozen=True)
class Output:
    """One generated file."""

    data: bytes
    media_type: str


@dataclass(frozen=True)
class Spend:
    """What a generation cost, as far as the provider says (tokens, dollars)."""

    usage: Usage = field(default_factory=Usage)
    cost: float | None = None


@dataclass(frozen=True)
class Made:
    """A finished generation: its files and what it cost."""

    outputs: list[Output]
    spend: Spend = field(default_factory=Spend)


@dataclass(frozen=True)
class Submitted:
    """A job the provider accepted: its id and what polling it needs (URLs), stored as JSON."""

    job: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """One poll's answer: still running, done (with what fetching needs), or failed."""

    state: Literal["running", "done", "failed"]
    message: str = ""  # why it failed, or how far it is ("in_progress 40%")
    detail: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ImageMaker(Protocol):
    """A provider that answers with the images in the request's own response."""

    name: str
    model: str

    async def make(self, request: ImageRequest, *, key: str, each: Saver) -> Spend:
        """Generate; `each` is awaited with every image as it arrives (saved durably
        before the next request, so a crash loses none already paid for)."""
        ...


@runtime_checkable
class JobProvider(Protocol):
    """A provider that runs a job: submit once, poll, fetch the result."""

    name: str
    model: str

    async def submit(self, request: Any, *, key: str) -> Submitted:
        """Start the job (this is what costs money)."""
        ...

    async def poll(self, job: Submitted, *, key: str) -> Progress:
        """How the job is doing; TransientError when the answer was not one."""
        ...

    async def fetch(self, job: Submitted, done: Progress, *, key: str) -> Made:
        """The finished job's files."""
        ...


class Saver(Protocol):
    async def __call__(self, output: Output) -> None: ...


@dataclass(frozen=True)
class Generation:
    """One paid generation as the usage records keep it: its kind (image, video), who
    made it, for which agent's session, its tokens and the dollars the provider reported
    (None: it reports none)."""

    kind: str
    provider: str
    model: str
    agent: str
    session: str
    usage: Usage
    cost: float | None


class UsageLog(Protocol):
    """Where each generation is recorded (services.usage.UsageLedger)."""

    async def record_generation(self, generation: Generation) -> None:
        """One generation in the usage records, as its own kind."""
        ...
