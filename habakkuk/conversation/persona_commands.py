"""/personality: the persona of this session (spec 000 "Chat commands").

`/personality` shows the session's persona and the choices (the built-ins and the home's
`personalities/*.md`); `/personality NAME` sets it, `/personality default` (or off, none)
clears it. The persona is a per-session setting in state.db beside /think's, appended
after the frozen system prompt in every request (engine/personas.py); /new starts a
session without it. Registered in `COMMANDS` when the package is imported (see __init__).
"""

from __future__ import annotations

from habakkuk.conversation.commands import Conversation, Reply, command
from habakkuk.engine.i18n import t


@command("personality", "the persona of this session", args="[NAME|default]")
async def _personality(conv: Conversation, rest: str) -> Reply:
    settings = conv.services.settings
    choices = ", ".join(settings.personalities())
    if not rest.strip():
        session = await conv.session()
        current = await settings.session_personality(session.id) if session else None
        if current:
            return Reply(t("personality.current", name=current, choices=choices))
        return Reply(t("personality.none", choices=choices))
    session = await conv.session(create=True)
    assert session is not None
    chosen = await settings.set_session_personality(session.id, rest.strip())
    if chosen is None:
        return Reply(t("personality.cleared"))
    return Reply(t("personality.set", name=chosen))
