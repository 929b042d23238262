"""Context compaction: fold older messages into a summary so a long session keeps fitting.

Nothing is rewritten: the summary goes into a compaction record, and from then on
the model is sent the latest summary followed by the messages after the cut (the
transcript's *view*, see `TranscriptStore.view`). The cut keeps as many recent
turns verbatim as fit in a fifth of `compact_at`, always the last one, and falls
only before a user message that starts a turn or before an assistant message, so
a tool call never loses its result; only a current turn that alone is over that
budget is cut inside. The summary is one call down the agent's model chain with a
fixed prompt; its input is the previous summary plus the folded messages as text.

The record is written under the job's lease and only if the transcript has not
moved since the view was read, so a crash or a race leaves the session as it was.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config import ModelRef
from ..i18n import t
from ..llm.hosted import describe
from ..llm.router import Caller, Router
from ..llm.types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from ..sessions import TranscriptStore, WriteGuard, summary_message

log = logging.getLogger(__name__)

# Tokens of envelope (role, separators) per message, on top of its content.
MESSAGE_OVERHEAD = 4
# Media are sent as pixels or pages, not text: a fixed guess per block.
IMAGE_TOKENS = 1_600
DOCUMENT_TOKENS = 3_000
# In the summary's input, tool output and call arguments longer than this are cut.
TOOL_OUTPUT_CUT = 2_000
TOOL_INPUT_CUT = 1_000
SUMMARY_MAX_TOKENS = 8_192
# The summary's input stays under about 3/4 of compact_at (the chain handles prompts that
# big), and is never cut below this many characters (about 25,000 tokens).
MIN_INPUT_CHARS = 100_000


@functools.cache
def _cjk() -> re.Pattern[str]:
    """The CJK characters: a pattern slow to compile (a few ms), so compiled on the first
    text that is not ASCII (estimate_text_tokens), not by every process that imports this."""
    return re.compile(
        "[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
        "\uff00-\uffef\U00020000-\U0003ffff]"
    )


SUMMARY_SYSTEM = """\
You write the running summary of a long conversation between a user and an AI agent \
that uses tools. The summary replaces the older part of the conversation in the \
agent's context: the agent must be able to carry on from the summary and the \
messages after it, without the original messages.

You are given the previous summary (if there is one) and the messages being folded \
into it, rendered as text. Write one updated summary that merges both. Keep:
- the user's goals and where each task stands;
- decisions made, and the reasons given for them;
- facts about the user: who they are, their preferences, constraints and how they \
like to work;
- open tasks, unanswered questions and everything the agent promised to do;
- exact file paths, URLs, commands, identifiers, names, numbers and dates, copied \
verbatim;
- what tools found or changed that still matters (results, errors, files written).

Leave out small talk, repetition and tool output that no longer matters. Never \
invent anything. Write in the language of the conversation, as compact notes under \
short headings, in at most about 2,000 words. Reply with the summary only."""


# -- token estimate ------------------------------------------------------------------


def estimate_text_tokens(text: str) -> int:
    """About 4 characters a token for latin scripts, 1.5 for CJK (no tokenizer needed)."""
    if not text:
        return 0
    if text.isascii():  # the common case, checked in C: no CJK to count
        return math.ceil(len(text) / 4)
    cjk = len(text) - len(_cjk().sub("", text))
    return math.ceil((len(text) - cjk) / 4 + cjk / 1.5)


def _block_tokens(block: object) -> int:
    if isinstance(block, TextBlock | ContextBlock):
        return estimate_text_tokens(block.text)
    if isinstance(block, ThinkingBlock):
        return estimate_text_tokens(block.text) + len(block.signature or block.encrypted) // 4
    if isinstance(block, ToolUseBlock):
        return estimate_text_tokens(block.tool + json.dumps(block.input, ensure_ascii=False))
    if isinstance(block, ToolResultBlock):
        return estimate_text_tokens(block.text)
    if isinstance(block, ImageBlock):
        return IMAGE_TOKENS
    if isinstance(block, DocumentBlock):
        return DOCUMENT_TOKENS
    if isinstance(block, OpaqueBlock):
        return estimate_text_tokens(json.dumps(block.data, ensure_ascii=False))
    return 0


def estimate_message_tokens(message: Message) -> int:
    """The estimated tokens of one message, envelope included."""
    return MESSAGE_OVERHEAD + sum(_block_tokens(b) for b in message.blocks)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The estimated tokens of a list of messages (~4 chars/token, ~1.5 for CJK, +4 each)."""
    return sum(estimate_message_tokens(m) for m in messages)


def estimate_request_tokens(
    system: str, tools: Sequence[ToolSpec], messages: Sequence[Message]
) -> int:
    """The estimated prompt of a whole request: system prompt, tool specs and messages."""
    specs = sum(spec_tokens(t) for t in tools)
    return estimate_text_tokens(system) + specs + estimate_tokens(messages)


# (name, description) -> (the schema object measured, its tokens). Specs are rebuilt every
# turn around the same schema objects, and serializing them was most of an estimate's cost.
_SPEC_TOKENS: dict[tuple[str, str], tuple[object, int]] = {}
SPEC_CACHE_SIZE = 4096


def spec_tokens(spec: ToolSpec) -> int:
    """The estimated tokens of one tool spec (name, description, schema), cached."""
    key = (spec.name, spec.description)
    cached = _SPEC_TOKENS.get(key)
    if cached is not None and cached[0] is spec.input_schema:
        return cached[1]
    tokens = estimate_text_tokens(spec.name + spec.description + json.dumps(spec.input_schema))
    if len(_SPEC_TOKENS) >= SPEC_CACHE_SIZE:
        _SPEC_TOKENS.clear()
    # Holding the schema keeps its identity meaningful: the same object, the same tokens.
    _SPEC_TOKENS[key] = (spec.input_schema, tokens)
    return tokens


# -- the cut ---------------------------------------------------------------------------


def starts_turn(message: Message) -> bool:
    """A message the user typed (a user message that is not tool results)."""
    return message.role == "user" and not message.tool_results


def choose_cut(messages: Sequence[Message], budget: int) -> int:
    """The index of the first message to keep verbatim; 0 folds nothing.

    Whole turns are kept, newest first, while they fit in `budget` tokens, and the
    last turn always. Cuts fall before a message that starts a turn or before an
    assistant message, never before tool results, so a call keeps its result. Only
    when the last turn alone is over the budget is it cut inside, before the
    earliest of its assistant messages from which the rest fits (else its last one).
    """
    if not messages:
        return 0
    sizes = [estimate_message_tokens(m) for m in messages]
    suffix = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + sizes[index]
    # A view that begins mid-turn (an earlier cut inside one) counts index 0 as a start.
    starts = [i for i, m in enumerate(messages) if i == 0 or starts_turn(m)]
    current = starts[-1]
    if suffix[current] <= budget:
        keep = current
        for start in reversed(starts[:-1]):
            if suffix[start] > budget:
                break
            keep = start
        return keep
    inside = [i for i in range(current + 1, len(messages)) if messages[i].role == "assistant"]
    for index in inside:
        if suffix[index] <= budget:
            return index
    return inside[-1] if inside else current


# -- the summary's input ---------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters cut]"


def _render_block(block: object) -> str:
    if isinstance(block, TextBlock | ContextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return ""  # reasoning is the model's scratch work; its conclusions are in the text
    if isinstance(block, ToolUseBlock):
        args = json.dumps(block.input, ensure_ascii=False)
        return f"[tool call {block.tool} ({block.tool_use_id}): {_cut(args, TOOL_INPUT_CUT)}]"
    if isinstance(block, ToolResultBlock):
        label = "tool error" if block.is_error else "tool result"
        return f"[{label} ({block.tool_use_id}): {_cut(block.text, TOOL_OUTPUT_CUT)}]"
    if isinstance(block, ImageBlock):
        return f"[image: {block.name or block.media_type}]"
    if isinstance(block, DocumentBlock):
        return f"[document: {block.name or block.media_type}]"
    if isinstance(block, OpaqueBlock):
        return describe(block)  # a hosted web tool's call or result ("" for a pause mark)
    return f"[{getattr(block, 'type', 'block')}]"


def render_messages(messages: Sequence[Message]) -> str:
    """The messages as plain text for the summarizer: media and opaque blocks as
    placeholders, reasoning left out, long tool output cut."""
    parts = []
    for message in messages:
        who = "User" if message.role == "user" else "Assistant"
        if message.role == "user" and message.tool_results:
            who = "Tool results"
        body = "\n".join(p for p in (_render_block(b) for b in message.blocks) if p)
        if body:
            parts.append(f"{who}:\n{body}")
    return "\n\n".join(parts)


def summary_input(previous: str | None, folded: Sequence[Message], max_chars: int) -> str:
    """The summarizer's user message: the previous summary and the folded messages.

    Past `max_chars` the oldest part of the folded text gives way (the previous
    summary and the most recent messages matter most).
    """
    conversation = render_messages(folded)
    head = f"<previous_summary>\n{previous}\n</previous_summary>\n\n" if previous else ""
    room = max(1_000, max_chars - len(head))
    if len(conversation) > room:
        dropped = len(conversation) - room
        conversation = f"[… {dropped} earlier characters left out …]\n" + conversation[-room:]
    return (
        f"{head}<messages_to_fold>\n{conversation}\n</messages_to_fold>\n\n"
        "Write the updated summary."
    )


# -- compacting a session --------------------------------------------------------------


@dataclass
class CompactionOutcome:
    """What a compaction did: tokens of the prompt before and after, messages folded."""

    compacted: bool
    tokens_before: int
    tokens_after: int
    dropped: int = 0
    why: str = ""  # why nothing was compacted: compaction.reason.<why> in the catalogs
    budget: int = 0  # the tokens kept verbatim (the "fits" reason names them)

    @property
    def reason(self) -> str:
        """Why nothing was compacted, in English (the log's words)."""
        return self._reason("en")

    def _reason(self, language: str | None) -> str:
        if not self.why:
            return ""
        return t(f"compaction.reason.{self.why}", budget=f"{self.budget:,}", language=language)

    def describe(self) -> str:
        """One line for the user, in the language in use (habakkuk.engine.i18n)."""
        if self.compacted:
            before, after = f"{self.tokens_before:,}", f"{self.tokens_after:,}"
            return t("compaction.done", count=self.dropped, before=before, after=after)
        return t("compaction.nothing", reason=self._reason(None))


async def compact(
    transcripts: TranscriptStore,
    router: Router,
    *,
    session_id: str,
    chain: list[ModelRef],
    caller: Caller,
    compact_at: int,
    guard: WriteGuard | None,
    system: str,
    tools: Sequence[ToolSpec] = (),
    tokens_before: int | None = None,
    max_input_chars: int | None = None,
    carry: Callable[[Sequence[Message]], str] | None = None,
) -> CompactionOutcome:
    """Fold the session's older messages into a new summary (one model call).

    `system` and `tools` are the turn's, to estimate the prompt after the cut;
    `tokens_before` is the prompt size that triggered this (estimated when None);
    `max_input_chars` bounds the summary's input (default: about 3/4 of compact_at).
    `carry(folded)` returns text appended to the summary verbatim, for state a model's
    summary could drop (tool search's unlocked tools); `folded` starts with the previous
    summary's message when there is one.
    ProviderError from the summary call and LeaseLost from the write propagate.
    """
    view = await transcripts.view(session_id)
    messages = [m.message for m in view.kept]
    before = (
        tokens_before
        if tokens_before is not None
        else estimate_request_tokens(system, tools, view.messages)
    )
    budget = max(1, compact_at // 5)
    cut = choose_cut(messages, budget)
    if cut == 0:
        if not messages:
            why = "empty"
        elif not any(starts_turn(m) for m in messages[1:]):
            why = "last_turn"
        else:
            why = "fits"
        return CompactionOutcome(False, before, before, why=why, budget=budget)
    previous = view.compaction.summary if view.compaction else None
    limit = max_input_chars or max(compact_at * 3, MIN_INPUT_CHARS)
    request = ModelRequest(
        model="",
        system=SUMMARY_SYSTEM,
        messages=[Message.user_text(summary_input(previous, messages[:cut], limit))],
        max_tokens=SUMMARY_MAX_TOKENS,
    )
    result = await router.complete(chain, request, caller=caller)
    summary = result.message.text.strip()
    if not summary:
        log.warning("compaction of %s: the model returned an empty summary", session_id)
        return CompactionOutcome(False, before, before, why="no_summary")
    if carry is not None:
        previous_head = [summary_message(previous)] if previous is not None else []
        carried = carry([*previous_head, *messages[:cut]])
        if carried:
            summary = f"{summary}\n\n{carried}"
    written = await transcripts.add_compaction(
        session_id, summary, view.kept[cut].seq, view.last_seq, guard
    )
    if not written:
        return CompactionOutcome(False, before, before, why="moved_on")
    after = estimate_request_tokens(system, tools, [summary_message(summary), *messages[cut:]])
    return CompactionOutcome(True, before, after, dropped=cut)
