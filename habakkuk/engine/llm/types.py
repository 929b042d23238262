"""Provider-neutral model types: messages made of blocks, tool specs, usage, stream events.

Blocks serialise to the JSON shapes the HTTP API shows (spec 001): text,
thinking, tool_use (tool, tool_use_id, input), tool_result (tool_use_id, text,
is_error), image and document (name, media_type), and opaque provider blocks
stored verbatim and replayed only to the provider that wrote them. A context
block is what Habakkuk sends along with the user's words (the current time, the
open todo items, a client's system messages): the model gets it as text, while
titles, search, exports and views show only what the user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass
class TextBlock:
    """Words. `signature` is a Gemini thought signature its part carried, replayed as is."""

    text: str
    signature: str = ""
    type: Literal["text"] = "text"


@dataclass
class ContextBlock:
    """Text Habakkuk adds to a user message for the model, kept apart from the user's words.

    `text` is exactly what the model is sent (so the cached prefix never moves);
    `kind` says what it is: "time" (the current time), "todo" (the open todo
    items) or "client" (a /v1 client's system and developer messages).
    """

    text: str
    kind: str = ""
    type: Literal["context"] = "context"


@dataclass
class ThinkingBlock:
    """Model reasoning. `signature` (Anthropic, Gemini) or `encrypted` (Responses) is replayed
    as is."""

    text: str
    signature: str = ""
    encrypted: str = ""
    redacted: bool = False
    provider: str = ""
    type: Literal["thinking"] = "thinking"


@dataclass
class ToolUseBlock:
    """A tool call. `signature` is the Gemini thought signature of its functionCall part
    (replayed exactly: Gemini 3 refuses a call of the current turn without it)."""

    tool_use_id: str
    tool: str
    input: dict[str, Any]
    signature: str = ""
    # The provider's toolset the call came from ("computer": Anthropic's computer toolset,
    # whose calls are named after their action; stored as a call of `computer` with it).
    toolset: str = ""
    type: Literal["tool_use"] = "tool_use"


@dataclass
class ToolResultBlock:
    tool_use_id: str
    text: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


@dataclass
class ImageBlock:
    media_type: str
    blob: str = ""  # path of the content-addressed blob
    name: str = ""
    # The call whose result showed it (set when a tool attached it): an adapter may put it
    # inside that result (the native computer tool's screenshots).
    tool_use_id: str = ""
    type: Literal["image"] = "image"


@dataclass
class DocumentBlock:
    name: str
    media_type: str
    blob: str = ""
    type: Literal["document"] = "document"


@dataclass
class OpaqueBlock:
    """A provider-specific block (hosted search calls and results), replayed verbatim."""

    provider: str
    data: dict[str, Any]
    type: Literal["opaque"] = "opaque"


Block = (
    TextBlock
    | ContextBlock
    | ThinkingBlock
    | ToolUseBlock
    | ToolResultBlock
    | ImageBlock
    | DocumentBlock
    | OpaqueBlock
)

_BLOCK_TYPES: dict[str, type] = {
    "text": TextBlock,
    "context": ContextBlock,
    "thinking": ThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
    "image": ImageBlock,
    "document": DocumentBlock,
    "opaque": OpaqueBlock,
}


def block_to_json(block: Block) -> dict[str, Any]:
    """The stored JSON of a block; empty optional fields are left out."""
    data: dict[str, Any] = {"type": block.type}
    for key, value in block.__dict__.items():
        if key == "type":
            continue
        if value in ("", False) and key not in ("text", "is_error"):
            continue
        data[key] = value
    return data


def block_from_json(data: dict[str, Any]) -> Block:
    """Parse a stored block; an unknown type becomes an opaque block (nothing is lost)."""
    kind = data.get("type")
    cls = _BLOCK_TYPES.get(str(kind))
    if cls is None:
        return OpaqueBlock(provider="", data=dict(data))
    fields = {k: v for k, v in data.items() if k != "type"}
    block: Block = cls(**fields)
    return block


@dataclass
class Message:
    """One message of a conversation."""

    role: Role
    blocks: list[Block]
    model: str = ""

    @property
    def text(self) -> str:
        """The concatenated text blocks (the words, without context blocks)."""
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.blocks if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.blocks if isinstance(b, ToolResultBlock)]

    def to_json(self) -> list[dict[str, Any]]:
        return [block_to_json(b) for b in self.blocks]

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls("user", [TextBlock(text)])


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class Usage:
    """Tokens of one call. `input_tokens` excludes cached ones, as the APIs report.

    `web_search_requests` and `web_fetch_requests` count the provider's hosted web
    tool uses in the call (llm/hosted.py), billed apart from the tokens.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    web_search_requests: int = 0
    web_fetch_requests: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.web_search_requests += other.web_search_requests
        self.web_fetch_requests += other.web_fetch_requests


@dataclass(frozen=True)
class NativeComputer:
    """The display the native tool is declared with: the size of the screenshots the
    model is shown (scaled as the function tools' are) and the X display number when
    there is one."""

    width: int
    height: int
    display: int | None = None


@dataclass
class ModelRequest:
    """One request to one model."""

    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 8192
    thinking: Literal["off", "low", "medium", "high"] = "off"
    api_key: str | None = None
    # Offer the provider's hosted web search and fetch where the model has them
    # (llm/hosted.py decides per provider and model; the agent's `web:` setting).
    web: bool = False
    # The session's persona (/personality), sent after `system`, the frozen prompt: the
    # cached prefix ends before it, so changing it never invalidates the frozen prompt.
    persona: str = ""
    # The provider's own computer tool in place of the computer_* function tools, set when
    # every model of the chain has one (llm/computer_use.py); None: not offered.
    computer: NativeComputer | None = None

    @property
    def system_text(self) -> str:
        """The system prompt as one text: the frozen prompt, then the persona (for the
        APIs whose prompt caching is by prefix: the frozen prompt stays the prefix)."""
        if not self.persona:
            return self.system
        return f"{self.system}\n\n{self.persona}" if self.system else self.persona


# -- stream events ------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStart:
    tool_use_id: str
    tool: str


@dataclass(frozen=True)
class ToolCallDelta:
    tool_use_id: str
    arguments: str  # a fragment of the JSON arguments


@dataclass(frozen=True)
class StreamDone:
    """The last event: the whole assistant message, its usage and why it stopped."""

    message: Message
    usage: Usage
    stop_reason: str = "end_turn"


StreamEvent = TextDelta | ThinkingDelta | ToolCallStart | ToolCallDelta | StreamDone
