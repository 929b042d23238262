"""What a turn job carries: `TurnRequest`, the payload of the kind "turn" (engine/payloads.py).

A turn is a session's next message (`text`, with attachments as `blocks`), or a /compact
of the session (`compact`). `attended`: someone may be asked to approve its calls (the
terminal, the dashboard, the chat it came from). `reply_to`: the chat the reply goes to
(a channel message's, a webhook's, a schedule's), which also asks the chat's approvals
for an attended turn. `subturn`: what a delegated child overrides (work/delegation.py
queues those, as its own kind, with this request inside). `goal`: the session's running
/goal when the turn was queued (read in the transaction that queues it), so the step
after the turn (services/goals.py) costs nothing for the turns of a session without one.

The stored form is the one turn jobs have always had in control.db, flat:
{"session", "text", "attended", "reply_to": {"to", "message", "sender"}, "blocks": [...]},
{"session", "compact": true} for a compaction, and a sub-turn's "subturn": true with
"toolsets", "model", "output_schema" and "workspace". Older rows parse: a missing field
takes its default, and a platform message id stored as a number is read as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .. import payloads
from ..jobs import Job, JobKind, declare_kind, declared_kind, decoded_payload, payload_of
from ..llm.types import Block, block_from_json, block_to_json
from ..payloads import JsonObject, PayloadError

TURN_KIND = "turn"
VoiceReply = Literal["", "also", "only"]
VOICE_REPLIES: tuple[VoiceReply, ...] = ("", "also", "only")


@dataclass(frozen=True)
class ReplyTo:
    """Where a turn's reply goes: a chat address (CHANNEL:CHAT[:THREAD]), the message it
    answers ("" for none: a webhook's or a schedule's turn) and who asked (a chat user's
    id, "webhook:NAME", "schedule:ID"). `voice`: the reply is also read aloud as a voice
    note ("also"), or only so ("only": the text goes when speaking fails), as the
    channel's voice_replies decided when the message came ("": text only)."""

    to: str
    message: str = ""
    sender: str = ""
    voice: VoiceReply = ""

    def to_json(self) -> JsonObject:
        data: JsonObject = {"to": self.to, "message": self.message, "sender": self.sender}
        if self.voice:
            data["voice"] = self.voice
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplyTo:
        message = data.get("message")
        if isinstance(message, int) and not isinstance(message, bool):
            said = str(message)  # older rows kept a platform's numeric id as it came
        else:
            said = payloads.text(data, "message", "")
        voice = payloads.text(data, "voice", "")
        if voice not in VOICE_REPLIES:
            raise PayloadError("voice", f"expected one of {VOICE_REPLIES}, got {voice!r}")
        return cls(
            payloads.text(data, "to"),
            said,
            payloads.text(data, "sender", ""),
            "also" if voice == "also" else "only" if voice == "only" else "",
        )


def reply_to_from(data: Mapping[str, Any], key: str = "reply_to") -> ReplyTo | None:
    """The ReplyTo stored under `key` of `data` (None when there is none)."""
    found = payloads.mapping(data, key)
    if found is None:
        return None
    try:
        return ReplyTo.from_json(found)
    except PayloadError as exc:
        raise exc.inside(key) from None


@dataclass(frozen=True)
class SubturnOptions:
    """What a delegated child's turn overrides (spec 000 "Delegation"): the toolsets of its
    agent it gets (None: all but delegate), a model tried before its agent's chain, the
    JSON schema its final answer must match, and its git worktree as its workspace."""

    toolsets: tuple[str, ...] | None = None
    model: str | None = None
    output_schema: Mapping[str, Any] | None = None
    workspace: str | None = None


@dataclass(frozen=True)
class TurnRequest:
    """A turn job's payload (see the module docstring)."""

    session: str
    text: str = ""
    attended: bool = False
    reply_to: ReplyTo | None = None
    blocks: tuple[Block, ...] = ()
    compact: bool = False
    subturn: SubturnOptions | None = None
    goal: str = ""
    # The folder the turn works in instead of its agent's workspace (an editor's project,
    # protocols/acp); a sub-turn's worktree rides in `subturn` instead.
    workspace: str | None = None

    def to_json(self) -> JsonObject:
        data: JsonObject = {}
        if self.goal:
            data["goal"] = self.goal
        sub = self.subturn
        if sub is not None and sub.workspace is not None:
            data["workspace"] = sub.workspace
        elif sub is None and self.workspace:
            data["workspace"] = self.workspace
        if self.reply_to is not None:
            data["reply_to"] = self.reply_to.to_json()
        if self.blocks:
            data["blocks"] = [block_to_json(block) for block in self.blocks]
        if sub is not None:
            data["subturn"] = True
        if self.compact:
            data["compact"] = True
        else:
            data["text"] = self.text
            data["attended"] = self.attended
        data["session"] = self.session
        if sub is not None:
            data["toolsets"] = list(sub.toolsets) if sub.toolsets is not None else None
            data["model"] = sub.model
            schema = sub.output_schema
            data["output_schema"] = dict(schema) if schema is not None else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnRequest:
        subturn = None
        if payloads.flag(data, "subturn"):
            subturn = SubturnOptions(
                toolsets=payloads.texts(data, "toolsets"),
                model=payloads.optional_text(data, "model"),
                output_schema=payloads.mapping(data, "output_schema"),
                workspace=payloads.optional_text(data, "workspace") or None,
            )
        return cls(
            session=payloads.text(data, "session"),
            text=payloads.text(data, "text", ""),
            attended=payloads.flag(data, "attended"),
            reply_to=reply_to_from(data),
            blocks=_blocks(data),
            compact=payloads.flag(data, "compact"),
            subturn=subturn,
            goal=payloads.text(data, "goal", ""),
            workspace=None if subturn else payloads.optional_text(data, "workspace") or None,
        )


def _blocks(data: Mapping[str, Any]) -> tuple[Block, ...]:
    found = []
    for index, raw in enumerate(payloads.objects(data, "blocks")):
        try:
            found.append(block_from_json(dict(raw)))
        except TypeError as exc:  # a field the block type does not have, or one missing
            raise PayloadError(f"blocks[{index}]", str(exc)) from None
    return tuple(found)


TURN: JobKind[TurnRequest] = declare_kind(JobKind(TURN_KIND, payload=TurnRequest, noun="turn"))


def turn_request(job: Job) -> TurnRequest | None:
    """The request of a turn job; None for a job of another kind, or one whose payload
    does not parse (for readers that only look: its reply address, its session)."""
    if declared_kind(job.kind) is not TURN:
        return None
    found = decoded_payload(job)
    return found if isinstance(found, TurnRequest) else None


def request_of(job: Job) -> TurnRequest:
    """The request of a turn job, for its handler; BadPayload when it does not parse."""
    return payload_of(job, TURN)


@runtime_checkable
class InSession(Protocol):
    """A payload of work done in one session (a turn, a card's attempt, a review)."""

    @property
    def session(self) -> str: ...


def session_of(job: Job) -> str:
    """The session a job works in, from its typed payload ("" for a job of none: a
    schedule's slot, the retention sweep; or one whose payload does not parse)."""
    found = decoded_payload(job)
    return found.session if isinstance(found, InSession) else ""
