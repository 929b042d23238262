"""Bus events as Textual messages: one Message class per event class of the catalogue.

The app's events worker posts `message_for(event)` to every live screen; a screen
handles the kinds it cares about with `@on_event(TurnTextArrived)` (see
screens/base.py). The message classes mirror the event classes' hierarchy, so a
handler for `ApprovalArrived` gets every approval event, and one for `BusEvent`
gets them all.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from textual.message import Message

from habakkuk.engine.events import (
    ApprovalEvent,
    CardChanged,
    Compacted,
    ConfigReloaded,
    DelegateEnded,
    DelegateStarted,
    EventPayload,
    GoalChanged,
    JobFinished,
    ModelReplied,
    QuestionEvent,
    SessionRenamed,
    ToolArgsStreamed,
    ToolCallStreamed,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnReset,
    TurnStarted,
    TurnText,
    TurnThinking,
)

P = TypeVar("P", bound=EventPayload)


class BusEvent(Message, Generic[P], bubble=False):
    """One runtime bus event, delivered to each live screen."""

    def __init__(self, event: P) -> None:
        super().__init__()
        self.event = event


class TurnStartedArrived(BusEvent[TurnStarted]):
    pass


class TurnEndedArrived(BusEvent[TurnEnded]):
    pass


class TurnTextArrived(BusEvent[TurnText]):
    pass


class TurnThinkingArrived(BusEvent[TurnThinking]):
    pass


class ToolCallStreamedArrived(BusEvent[ToolCallStreamed]):
    pass


class ToolArgsStreamedArrived(BusEvent[ToolArgsStreamed]):
    pass


class TurnResetArrived(BusEvent[TurnReset]):
    pass


class ModelRepliedArrived(BusEvent[ModelReplied]):
    pass


class CompactedArrived(BusEvent[Compacted]):
    pass


class ToolStartedArrived(BusEvent[ToolStarted]):
    pass


class ToolEndedArrived(BusEvent[ToolEnded]):
    pass


class ApprovalArrived(BusEvent[ApprovalEvent]):
    """Any approval event (asked, answered, withdrawn, reviewed): match on `event`."""


class QuestionArrived(BusEvent[QuestionEvent]):
    """Any clarify-question event (asked, answered, withdrawn): match on `event`."""


class JobFinishedArrived(BusEvent[JobFinished]):
    pass


class CardChangedArrived(BusEvent[CardChanged]):
    """A board card was created or changed (the Board screen and a card's detail)."""


class ConfigReloadedArrived(BusEvent[ConfigReloaded]):
    """config.yaml was read again (the overview's config row)."""


class GoalChangedArrived(BusEvent[GoalChanged]):
    """A session's goal was set, counted a turn or ended (the chat's status line and note)."""


class DelegateStartedArrived(BusEvent[DelegateStarted]):
    pass


class DelegateEndedArrived(BusEvent[DelegateEnded]):
    pass


class SessionRenamedArrived(BusEvent[SessionRenamed]):
    pass


# The one place an event class is paired with its message class; a subclass of an event
# class without its own entry gets its nearest base's message.
MESSAGES: dict[type[EventPayload], type[BusEvent[Any]]] = {
    TurnStarted: TurnStartedArrived,
    TurnEnded: TurnEndedArrived,
    TurnText: TurnTextArrived,
    TurnThinking: TurnThinkingArrived,
    ToolCallStreamed: ToolCallStreamedArrived,
    ToolArgsStreamed: ToolArgsStreamedArrived,
    TurnReset: TurnResetArrived,
    ModelReplied: ModelRepliedArrived,
    Compacted: CompactedArrived,
    ToolStarted: ToolStartedArrived,
    ToolEnded: ToolEndedArrived,
    ApprovalEvent: ApprovalArrived,
    QuestionEvent: QuestionArrived,
    JobFinished: JobFinishedArrived,
    CardChanged: CardChangedArrived,
    ConfigReloaded: ConfigReloadedArrived,
    GoalChanged: GoalChangedArrived,
    DelegateStarted: DelegateStartedArrived,
    DelegateEnded: DelegateEndedArrived,
    SessionRenamed: SessionRenamedArrived,
    EventPayload: BusEvent,
}


def message_for(event: EventPayload) -> BusEvent[Any]:
    """A new message carrying `event`, of the class paired with the event's class."""
    for cls in type(event).__mro__:
        message = MESSAGES.get(cls)
        if message is not None:
            return message(event)
    raise TypeError(f"not a bus event: {event!r}")  # pragma: no cover - publish checks
