"""The gateway: from a platform message to a turn, a command or an approval answer.

It decides who may talk (`allow_from`, or a one-hour pairing code the owner
approves with `habakkuk pair CODE`), whether a group message is addressed to
the bot, and which agent and session a conversation maps to (routes; a fresh
session after `session_idle`). It runs the chat commands the engine supports,
and it is the chat's approver: a tool call that needs approval is posted to the
chat (with buttons where the platform has them) and waits for "yes" or "no"
from an allowed sender, 15 minutes, then the step is skipped.

Exactly-once: a message already handled is dropped (`channel_seen`), a turn's
job id derives from the platform message id, and every reply is a delivery job
with an id derived from what caused it.

While a turn runs the gateway shows typing every 4 s, reacts (`reactions:
true`) and keeps a live progress draft edited at most every 3 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import mimetypes
import re
import secrets
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from habakkuk.conversation.answers import ANSWERS, answer_named, answer_word, verdict
from habakkuk.conversation.commands import dispatch
from habakkuk.engine.agent.requests import ReplyTo, TurnRequest, turn_request
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.events import EventPayload, ToolStarted, TurnEnded, TurnStarted
from habakkuk.engine.i18n import t, use_language
from habakkuk.engine.llm.types import Block
from habakkuk.engine.sessions import Session
from habakkuk.engine.store import StoreError
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalRequest

from .adapter import Adapter, Address, Button, InboundMessage, SendError
from .attachments import MAX_ATTACHMENT_BYTES, TOO_LARGE, for_model
from .conversation import ChannelConversation
from .facade import RuntimeFacade
from .health import ActivityLog
from .outbox import Outbox
from .store import PROMPT_SECONDS, ChannelStore, Prompt
from .tasks import cancel_and_wait
from .voice_replies import voice_for

log = logging.getLogger(__name__)

# Habakkuk's own chat text is the catalogs' `chat.*` (engine/i18n), in the channel's
# `language:` (else config.yaml's). What the model is told about an attachment is not a
# person's text: it stays here, in English, as the rest of the prompt.
NOTES = {
    "too_large": TOO_LARGE,
    "download_failed": "[attachment {name} could not be downloaded: {error}]",
    "saved": "[attachment saved to inbox/{name}]",
    "voice": "[voice note transcript: {text}]",
    "voice_failed": "[a voice note could not be transcribed: {error}]",
}


def answered_notice(answer: str) -> str:
    """What the chat is told once its answer is taken ("Approved", "Answered: ...")."""
    decided = answer_named(answer)
    return verdict(decided) if decided is not None else t("chat.answered", answer=answer)


def approval_buttons(nonce: str) -> tuple[tuple[Button, ...], ...]:
    """An approval prompt's buttons, in the order of ANSWERS (a button's data is its index)."""
    return (
        (
            Button(t("chat.button.approve"), f"fy|{nonce}|0"),
            Button(t("chat.button.deny"), f"fy|{nonce}|1"),
        ),
        (Button(t("chat.button.always"), f"fy|{nonce}|2"),),
    )


AdapterLookup = Callable[[str], Adapter | None]


def turn_id_for(msg: InboundMessage) -> str:
    """A turn's job id, derived from the platform message (redelivery-proof)."""
    return msg.turn_id or f"turn:{msg.channel}:{msg.chat}:{msg.message_id}"


@dataclass(frozen=True)
class Handled:
    """What the gateway did with one message (the web chat answers its POST with it)."""

    kind: Literal["turn", "command", "answer", "ignored"]
    turn: str | None = None
    text: str = ""  # a command's reply, or the notice of an approval answer


def _say_id(msg: InboundMessage, suffix: str = "") -> str:
    return f"say:{msg.channel}:{msg.key}{suffix}"


@dataclass
class _Watch:
    """A running channel turn: typing, reactions and the progress draft."""

    turn: str
    session: str
    address: Address
    message: str
    lines: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    # set when the turn ends: done, failed, stopped (or "" on shutdown)
    status: str | None = None


class Gateway:
    """Routes inbound messages of every channel account; answers approvals from chats."""

    def __init__(
        self,
        runtime: RuntimeFacade,
        store: ChannelStore,
        adapter_for: AdapterLookup,
        *,
        typing_every: float = 4.0,
        draft_after: float = 8.0,
        edit_every: float = 3.0,
        activity: ActivityLog | None = None,
    ):
        self.runtime = runtime
        self.config = runtime.config
        # a copy: the web chat's account joins it while the HTTP server runs
        self.channels = dict(runtime.config.channels)
        self.store = store
        self.queue = runtime.queue
        self.outbox = Outbox(runtime.queue)
        self.adapter_for = adapter_for
        self.typing_every = typing_every
        self.draft_after = draft_after
        self.edit_every = edit_every
        # each new message is noted as its account's last message in (channels/health.py)
        self.activity = activity or ActivityLog()
        # Prompts live in control.db (any process may receive the answer); these wake
        # this process's waiters at once when the answer arrived here.
        self._answered: dict[str, asyncio.Event] = {}
        self._prompt_locks: dict[str, asyncio.Lock] = {}
        self._watches: dict[str, _Watch] = {}
        self._events: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Follow the events bus for typing, reactions and progress drafts."""
        if self._events is None:
            followed = (TurnStarted, TurnEnded, ToolStarted)
            subscription = self.runtime.bus.subscribe(lambda e: isinstance(e, followed))
            self._events = asyncio.create_task(self._follow(subscription), name="gateway:events")

    async def stop(self) -> None:
        await cancel_and_wait(self._events)
        self._events = None
        for watch in list(self._watches.values()):
            await cancel_and_wait(watch.task)
        self._watches.clear()

    # -- inbound -------------------------------------------------------------------------

    async def handle(self, msg: InboundMessage) -> Handled | None:
        """Handle one inbound message once; a redelivered message is dropped (None)."""
        config = self.channels.get(msg.channel)
        if config is None:
            return None
        if await self.store.seen(msg.channel, msg.key):
            log.info("dropping redelivered message %s on %s", msg.key, msg.channel)
            return None
        self.activity.message_in(msg.channel)
        handled: Handled | None = None
        try:
            # Said to this chat in its language; its yes/no words read in it (answers.py).
            with use_language(self.config.language_of(msg.channel)):
                handled = await self._handle(config, msg)
        except (sqlite3.Error, StoreError):
            # The database is busy or broken: let the adapter stop before the offset moves,
            # so the batch comes again after the restart instead of being lost.
            raise
        except SendError as exc:
            log.warning("channel %s: could not answer %s: %s", msg.channel, msg.key, exc)
        except Exception:
            # A message that breaks the gateway must not stop the channel for good.
            log.exception("channel %s: message %s failed; dropped", msg.channel, msg.key)
        await self.store.mark_seen(msg.channel, msg.key)
        return handled

    async def _handle(self, config: ChannelConfig, msg: InboundMessage) -> Handled:
        how = await self.allowed(config, msg)
        if msg.callback is not None:
            await self._on_button(msg, how)
            return Handled("answer")
        if how is None:
            if not msg.is_group:
                pairing = await self.store.pairing_for(
                    msg.channel, msg.sender, msg.sender_name, str(msg.address)
                )
                await self._say(msg, t("chat.pair_needed", code=pairing.code))
            return Handled("ignored")
        if msg.is_group and (
            config.groups == "off" or (config.groups == "mention" and not msg.addressed)
        ):
            return Handled("ignored")
        self._message_in(config, msg, how)
        text = msg.text.strip()
        if text and not text.startswith("/"):
            prompt = await self.store.waiting_prompt(msg.address.conversation)
            answer = self._answer_for(prompt, text) if prompt is not None else None
            if prompt is not None and answer is not None:
                await self._answer_prompt(prompt, answer, f"{msg.channel}:{msg.sender}")
                return Handled("answer", text=answered_notice(answer))
        if text.startswith("/") and not msg.attachments:
            return await self._command(config, msg, how, text)
        return Handled("turn", await self._start_turn(config, msg, text))

    def _message_in(self, config: ChannelConfig, msg: InboundMessage, how: str) -> None:
        """Fire the message_in hooks of an accepted message (subject: the channel account).

        Accepted: from an allowed sender, addressed to the bot in a group, seen for the
        first time; whatever it turns out to be (a turn, a command, an answer).
        """
        attachments = [
            {"name": a.name, "media_type": a.media_type, "kind": a.kind} for a in msg.attachments
        ]
        self.runtime.hooks.fire(
            "message_in",
            msg.channel,
            {
                "channel": msg.channel,
                "type": config.type,
                "conversation": msg.address.conversation,
                "chat": msg.chat,
                "thread": msg.thread,
                "message_id": msg.message_id,
                "sender": msg.sender,
                "sender_name": msg.sender_name,
                "allowed_by": how,
                "group": msg.is_group,
                "text": msg.text,
                "attachments": attachments,
            },
        )

    async def allowed(self, config: ChannelConfig, msg: InboundMessage) -> str | None:
        """How the sender got in (open, allow_from, paired), or None for a stranger."""
        if config.allow_all:
            return "open"
        names = {msg.sender.lower(), *(a.lower() for a in msg.sender_aliases)}
        if any(entry.lower() in names for entry in config.allowed):
            return "allow_from"
        return await self.store.allowed_user(msg.channel, msg.sender)

    def _answer_for(self, prompt: Prompt, text: str) -> str | None:
        """What a typed message answers: yes/no words for approvals, anything for questions."""
        if prompt.kind == "question":
            return text
        return answer_word(text)

    async def _answer_prompt(self, prompt: Prompt, answer: str, by: str) -> bool:
        """Answer a prompt from its chat: an approval through the approvals service's one
        answer path (as the terminal, the dashboard and the API do), a question here.
        An approval's `answer` is a word already read or a button's choice: one that
        names no answer answers nothing."""
        if prompt.kind == "approval":
            decided = answer_named(answer)
            if decided is None:
                return False
            return await self.runtime.approvals.respond(prompt.id, decided, by, notify=False)
        return await self._record_answer(prompt, answer, by)

    async def _record_answer(self, prompt: Prompt, answer: str, by: str) -> bool:
        """Store the first answer (any process waiting on the prompt picks it up)."""
        recorded = await self.store.answer_prompt(prompt.id, answer, by)
        event = self._answered.get(prompt.id)
        if event is not None:
            event.set()
        return recorded

    async def _say(self, msg: InboundMessage, text: str, suffix: str = "") -> None:
        """Reply to `msg` through a delivery job whose id derives from the message."""
        await self.outbox.send_text(
            _say_id(msg, suffix), msg.address, text, reply_to=msg.message_id
        )

    # -- conversations -------------------------------------------------------------------

    def route_agent(self, config: ChannelConfig, msg: InboundMessage) -> str:
        """The agent a conversation is routed to by the channel's routes."""
        names = {msg.sender, *msg.sender_aliases}
        for route in config.routes:
            if route.chat is not None and route.chat == msg.chat:
                return route.agent
            if route.user is not None and route.user in names:
                return route.agent
        return self.config.agent(config.agent).name

    async def session_for(
        self,
        config: ChannelConfig,
        msg: InboundMessage,
        *,
        fresh: bool = False,
        create: bool = True,
    ) -> Session | None:
        """The conversation's session: the bound one unless idle too long (or `fresh`),
        else a new one bound here (None instead without `create`)."""
        conversation = msg.address.conversation
        binding = await self.store.binding(conversation)
        agent = (binding.agent_override if binding else "") or self.route_agent(config, msg)
        if agent not in self.config.agents:
            agent = self.config.agent(None).name
        if binding is not None and not fresh:
            idle = time.time() - binding.last_active
            session = await self.runtime.transcripts.get_session(binding.session)
            if (
                session is not None
                and session.agent == agent
                and idle <= config.session_idle_seconds
            ):
                return session
        if not create:
            return None
        # A direct message is a chat with the user; a group is not (no welcome there).
        session = await self.runtime.sessions.new_session(
            agent, origin=f"channel:{msg.channel}", chat=not msg.is_group
        )
        await self.store.bind(conversation, session.id)
        return session

    async def start_turn(self, config: ChannelConfig, msg: InboundMessage, text: str) -> str | None:
        """Queue `text` as a turn of the conversation `msg` belongs to (/retry, /queue)."""
        return await self._start_turn(config, msg, text)

    @staticmethod
    def reply_to(msg: InboundMessage) -> ReplyTo:
        """Where a turn's reply (and its approvals) go: the message's chat."""
        return ReplyTo(str(msg.address), msg.message_id, msg.sender)

    @staticmethod
    def say_id(msg: InboundMessage, suffix: str = "") -> str:
        """The delivery id of a reply to `msg` (derived from it: sent once)."""
        return _say_id(msg, suffix)

    async def _start_turn(
        self, config: ChannelConfig, msg: InboundMessage, text: str, *, turn_id: str | None = None
    ) -> str | None:
        session = await self.session_for(config, msg)
        assert session is not None
        agent = self.config.agent(session.agent)
        blocks: list[Block] = list(msg.blocks)
        notes: list[str] = []
        if msg.attachments:
            notes, blocks = await self._attachments(msg, agent.workspace_path)
        full = "\n\n".join(part for part in [text, *notes] if part)
        if not full and not blocks:
            return None
        turn = await self.runtime.turns.submit(
            session.id,
            full,
            turn_id=turn_id or turn_id_for(msg),
            attended=True,
            reply_to=replace(self.reply_to(msg), voice=voice_for(config, msg, self.config.tts)),
            blocks=blocks,
        )
        await self.store.touch(msg.address.conversation)
        return turn

    # -- attachments ----------------------------------------------------------------------

    async def _attachments(
        self, msg: InboundMessage, workspace: Path
    ) -> tuple[list[str], list[Block]]:
        """Download, copy to the workspace inbox; what the model gets of each is the
        attachments rule (channels/attachments.py), and a voice note is transcribed."""
        adapter = self.adapter_for(msg.channel)
        notes: list[str] = []
        blocks: list[Block] = []
        for index, attachment in enumerate(msg.attachments):
            if adapter is None or not adapter.can("download"):
                continue
            if attachment.size is not None and attachment.size > MAX_ATTACHMENT_BYTES:
                notes.append(NOTES["too_large"].format(name=attachment.name))
                continue
            try:
                data = await adapter.download(attachment)
            except SendError as exc:
                notes.append(NOTES["download_failed"].format(name=attachment.name, error=exc))
                continue
            if len(data) > MAX_ATTACHMENT_BYTES:
                notes.append(NOTES["too_large"].format(name=attachment.name))
                continue
            suffix = Path(attachment.name).suffix or (
                mimetypes.guess_extension(attachment.media_type) or ""
            )
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(attachment.name).name) or f"file{suffix}"
            name = f"{msg.message_id}-{index}-{safe}"
            target = workspace / "inbox" / name
            await asyncio.to_thread(_copy_into, data, target)
            notes.append(NOTES["saved"].format(name=name))
            given = await for_model(
                self.runtime.blobs, data, attachment.media_type, name, f"inbox/{name}"
            )
            blocks.extend(given.blocks)
            if given.note:
                notes.append(given.note)
            if given.blocks or given.note:
                continue
            if attachment.kind in ("voice", "audio") and self.config.transcription is not None:
                try:
                    transcript = await self._transcribe(data, name, attachment.media_type)
                    notes.append(NOTES["voice"].format(text=transcript))
                except SendError as exc:
                    notes.append(NOTES["voice_failed"].format(error=exc))
        return notes, blocks

    async def _transcribe(self, data: bytes, name: str, media_type: str) -> str:
        """Text of a voice note (the one transcription client, voice/transcription.py)."""
        from habakkuk.voice.transcription import TranscriptionError, transcribe

        settings = self.config.transcription
        assert settings is not None
        try:
            return await transcribe(settings, self.runtime.env, data, name, media_type)
        except TranscriptionError as exc:
            raise SendError(str(exc)) from None

    # -- commands -----------------------------------------------------------------------

    async def _command(
        self, config: ChannelConfig, msg: InboundMessage, how: str, text: str
    ) -> Handled:
        """Run a chat command (habakkuk.conversation) and say its reply."""
        conversation = ChannelConversation(self, config, msg, how)
        reply = await dispatch(text, conversation)
        if reply is not None and reply.text:
            await self._say(msg, reply.text)
        return Handled("command", conversation.turn, reply.text if reply is not None else "")

    # -- approvals ------------------------------------------------------------------------

    def approver_for(self, request: TurnRequest) -> ChatApprover | None:
        """The chat approver of a channel turn (None for other turns)."""
        if request.reply_to is None:
            return None
        try:
            address = Address.parse(request.reply_to.to)
        except ValueError:
            return None
        return ChatApprover(self, address)

    async def ask_approval(self, address: Address, request: ApprovalRequest) -> ApprovalDecision:
        """Post an approval to the chat and wait for yes or no (15 minutes, then skipped).

        The request also goes through the runtime's approval hub, so another client
        (the terminal, the dashboard) may answer it too; the first answer wins. A
        client in another process answers through control.db (`_wait_answer`).
        """
        hub = self.runtime.approvals
        async with self._prompt_locks.setdefault(address.conversation, asyncio.Lock()):
            request.id = request.id or f"apr_{secrets.token_hex(6)}"
            prompt = Prompt(
                request.id, "approval", address.conversation, request.turn,
                secrets.token_hex(4), list(ANSWERS), None, "", time.time(),
                # recorded so every process (the terminal, the dashboard) can show it
                tool=request.tool, summary=request.summary, reason=request.reason,
                agent=request.agent, session=request.session,
            )  # fmt: skip
            text = t("chat.approval", tool=request.tool, summary=request.summary[:500])
            await self._post_prompt(address, prompt, text, approval_buttons(prompt.nonce))
            decided = asyncio.create_task(hub.approve(request))
            typed = asyncio.create_task(self._wait_answer(prompt.id, hub.timeout + 5))
            try:
                done, _ = await asyncio.wait({decided, typed}, return_when=asyncio.FIRST_COMPLETED)
                found = typed.result() if typed in done else None
                # Answered in control.db (here or by another process): hand it to the hub.
                answer = answer_named(found[0]) if found is not None else None
                if found is not None and answer is not None:
                    hub.answer(request.id, answer, by=found[1])
                decision = await decided
            finally:
                for task in (decided, typed):
                    task.cancel()
                await asyncio.gather(decided, typed, return_exceptions=True)
                await self._close_prompt(address, prompt)
            if decision.by == "timeout":
                await self.outbox.send_text(
                    f"prompt-expired:{prompt.id}", address, t("chat.approval_skipped")
                )
            return decision

    async def ask_question(self, address: Address, request: Any) -> str | None:
        """Post clarify questions to the chat; the user's next message (or button) answers.

        None when nobody answered in 15 minutes.
        """
        async with self._prompt_locks.setdefault(address.conversation, asyncio.Lock()):
            questions = list(request.questions)
            choices = list(questions[0].choices) if len(questions) == 1 else []
            prompt = Prompt(
                f"ask_{secrets.token_hex(6)}", "question", address.conversation, request.turn,
                secrets.token_hex(4), choices, None, "", time.time(),
            )  # fmt: skip
            buttons = tuple(
                (Button(c[:60], f"fy|{prompt.nonce}|{i}"),) for i, c in enumerate(choices)
            )
            text = t("chat.question", questions=request.render())
            await self._post_prompt(address, prompt, text, buttons)
            try:
                found = await self._wait_answer(prompt.id, PROMPT_SECONDS)
            finally:
                await self._close_prompt(address, prompt)
            return found[0] if found else None

    async def _post_prompt(
        self,
        address: Address,
        prompt: Prompt,
        text: str,
        buttons: tuple[tuple[Button, ...], ...],
    ) -> None:
        await self.store.open_prompt(prompt)
        self._answered[prompt.id] = asyncio.Event()
        await self.outbox.send_text(f"prompt:{prompt.id}", address, text, buttons=buttons)

    async def _wait_answer(self, prompt_id: str, timeout: float) -> tuple[str, str] | None:
        """The prompt's (answer, by) once given here or in another process; None at timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        event = self._answered.setdefault(prompt_id, asyncio.Event())
        while True:
            found = await self.store.prompt_answer(prompt_id)
            if found is not None:
                return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            event.clear()
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                # another process's answer shows up in control.db: look every half second
                await wait_within(event.wait(), min(0.5, remaining))

    async def _close_prompt(self, address: Address, prompt: Prompt) -> None:
        self._answered.pop(prompt.id, None)
        with contextlib.suppress(Exception):
            await self.store.close_prompt(prompt.id)
        adapter = self.adapter_for(address.channel)
        if adapter is None or not adapter.can("buttons"):
            return
        for message_id in (await self.store.sent_chunks(f"prompt:{prompt.id}")).values():
            with contextlib.suppress(SendError):
                await adapter.strip_buttons(address, message_id)

    async def _on_button(self, msg: InboundMessage, how: str | None) -> None:
        """A button press: answer its prompt, or say the prompt expired."""
        callback = msg.callback
        assert callback is not None
        parts = callback.data.split("|")
        prompt = None
        if len(parts) == 3 and parts[0] == "fy" and parts[2].isdigit():
            prompt = await self.store.prompt_by_nonce(parts[1])
        notice = t("chat.expired")
        if how is None:
            notice = t("chat.not_allowed")
        elif prompt is not None and int(parts[2]) < len(prompt.choices):
            answer = prompt.choices[int(parts[2])]
            if await self._answer_prompt(prompt, answer, f"{msg.channel}:{msg.sender}"):
                notice = answered_notice(answer)
        adapter = self.adapter_for(msg.channel)
        if adapter is not None:
            with contextlib.suppress(SendError):
                await adapter.answer_callback(callback, notice[:190])
            if how is not None:
                with contextlib.suppress(SendError):
                    await adapter.strip_buttons(msg.address, callback.message_id)

    # -- typing, reactions and progress drafts ----------------------------------------------

    async def _follow(self, subscription: Any) -> None:
        with subscription:
            async for event in subscription:
                try:
                    await self._on_event(event)
                except Exception:
                    log.exception("gateway: handling %s failed", event.kind)

    async def _on_event(self, event: EventPayload) -> None:
        match event:
            case TurnStarted():
                await self._begin_watch(event.turn, event.session)
            case ToolStarted():
                self._tool_line(event)
            case TurnEnded():
                watch = self._watches.get(event.turn)
                if watch is not None:
                    await self._end_watch(watch, event.status)

    async def _begin_watch(self, turn: str, session: str) -> None:
        if turn in self._watches:
            return
        job = await self.queue.get(turn)
        request = turn_request(job) if job is not None else None
        reply_to = request.reply_to if request is not None else None
        if reply_to is None:
            return
        try:
            address = Address.parse(reply_to.to)
        except ValueError:
            return
        if address.channel not in self.channels:
            return
        watch = _Watch(turn, session, address, reply_to.message)
        self._watches[turn] = watch
        watch.task = asyncio.create_task(self._watch(watch), name=f"watch:{turn}")

    def _tool_line(self, event: ToolStarted) -> None:
        for watch in self._watches.values():
            if watch.session == event.session:
                watch.lines.append(f"• {event.tool}: {event.title[:120]}")
                del watch.lines[:-8]
                watch.changed.set()

    async def _watch(self, watch: _Watch) -> None:
        config = self.channels[watch.address.channel]
        started = time.monotonic()
        adapter = self.adapter_for(watch.address.channel)
        if config.reactions and adapter is not None and adapter.can("reactions") and watch.message:
            with contextlib.suppress(SendError):
                await adapter.react(watch.address, watch.message, "👀")
        draft = await self.store.draft(watch.turn)
        draft_id = draft[1] if draft else None
        shown: list[str] | None = None
        last_edit = 0.0
        next_typing = 0.0
        while watch.status is None:
            adapter = self.adapter_for(watch.address.channel)
            now = time.monotonic()
            if adapter is not None and adapter.can("typing") and now >= next_typing:
                with contextlib.suppress(SendError):
                    await adapter.typing(watch.address)
                next_typing = now + self.typing_every
            wants_draft = (
                config.progress
                and adapter is not None
                and adapter.can("edit")
                and now - started >= self.draft_after
                and now - last_edit >= self.edit_every
                and (draft_id is None or shown != watch.lines)
            )
            if wants_draft and adapter is not None:
                working = t("chat.working", language=self.config.language_of(watch.address.channel))
                text = "\n".join([working, *watch.lines])
                chunk = adapter.render(text)[0]
                try:
                    if draft_id is None:
                        draft_id = await adapter.send_text(watch.address, chunk, silent=True)
                        await self.store.save_draft(watch.turn, str(watch.address), draft_id)
                    else:
                        await adapter.edit_text(watch.address, draft_id, chunk)
                    shown = list(watch.lines)
                except SendError as exc:
                    log.info("progress draft of %s: %s", watch.turn, exc)
                last_edit = time.monotonic()
            wake = [next_typing - time.monotonic()]
            if config.progress:
                wake.append(max(started + self.draft_after, last_edit + self.edit_every) - now)
            if watch.status is not None:
                break
            watch.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_within(watch.changed.wait(), max(0.05, min(wake)))
        adapter = self.adapter_for(watch.address.channel)
        if config.reactions and watch.status and adapter is not None and watch.message:
            emoji = {"done": "👍", "failed": "😢"}.get(watch.status)  # none when stopped
            with contextlib.suppress(SendError):
                await adapter.react(watch.address, watch.message, emoji)

    async def _end_watch(self, watch: _Watch, status: str | None) -> None:
        """Let the watch finish (its last draft edit, the final reaction), bounded."""
        watch.status = status or ""
        watch.changed.set()
        if watch.task is not None:
            try:
                await wait_within(asyncio.shield(watch.task), 10.0)
            except TimeoutError:
                watch.task.cancel()
            except Exception:
                log.exception("progress watch of %s failed", watch.turn)
        self._watches.pop(watch.turn, None)

    async def settled(self, turn: str) -> None:
        """Wait (bounded) until the turn's typing/draft watch has finished."""
        watch = self._watches.get(turn)
        if watch is not None and watch.task is not None:
            with contextlib.suppress(Exception):
                await wait_within(asyncio.shield(watch.task), 10.0)


class ChatApprover:
    """The Approver (and clarify Asker) of a channel turn: asks in its chat."""

    def __init__(self, gateway: Gateway, address: Address):
        self.gateway = gateway
        self.address = address
        # Asked from the turn's job, which knows no chat: the prompt, its buttons and its
        # expiry notice are said in the language of the chat it goes to.
        self.language = gateway.config.language_of(address.channel)

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        with use_language(self.language):
            return await self.gateway.ask_approval(self.address, request)

    async def ask(self, request: Any) -> str | None:
        """clarify's questions (a ClarifyRequest): the user's answer, or None."""
        with use_language(self.language):
            return await self.gateway.ask_question(self.address, request)


def _copy_into(data: bytes, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def short_hash(*parts: str) -> str:
    """A short stable hash of `parts` (for job ids derived from several values)."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:20]


def button_rows(raw: list[list[dict[str, str]]]) -> list[list[Button]]:
    return [[Button(b["text"], b["data"]) for b in row] for row in raw]
