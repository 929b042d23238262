"""Session settings: the /model, /think and /personality choices of a session, kept in
state.db.

Its Protocol, what the surfaces use of it, is engine.session_access.SettingsAccess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from habakkuk.engine import personas
from habakkuk.engine.config import THINKING_LEVELS, ModelRef, Thinking, thinking_level
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.i18n import t

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.llm.usage import UsageStore
    from habakkuk.engine.state import StateStore

    from .sessions import Sessions


class SessionSettings:
    """What /model and /think chose for a session (a starting turn reads both)."""

    def __init__(self, config: Config, sessions: Sessions, usage: UsageStore | None):
        self.config = config
        self.sessions = sessions
        self.usage = usage

    @property
    def _state(self) -> StateStore | None:
        return self.sessions.state

    async def set_session_model(self, session_id: str, model: str | None) -> ModelRef | None:
        """/model provider/model: try this model first in the session's turns (None clears).

        HabakkukError when the text is not PROVIDER/MODEL or the provider is not configured.
        """
        await self.sessions.session(session_id)
        state = self.sessions.state_store()
        if model is None or not model.strip():
            await state.set_setting(session_id, "model", None)
            return None
        try:
            ref = ModelRef.parse(model.strip())
        except ValueError:  # ModelRef.parse's one complaint, in the person's words
            raise HabakkukError.said(
                "errors.settings.bad_model", given=repr(model.strip())
            ) from None
        if ref.provider not in self.config.providers:
            known = ", ".join(sorted(self.config.providers)) or "none"
            raise HabakkukError.said(
                "errors.settings.unknown_provider", provider=repr(ref.provider), providers=known
            )
        await state.set_setting(session_id, "model", str(ref))
        return ref

    async def session_model(self, session_id: str) -> ModelRef | None:
        """The session's /model choice, if any."""
        if self._state is None:
            return None
        choice = await self._state.setting(session_id, "model")
        try:
            return ModelRef.parse(choice) if choice else None
        except ValueError:
            return None

    async def set_session_thinking(
        self, session_id: str, level: str | None
    ) -> tuple[Thinking, bool]:
        """/think LEVEL: the effort sent with each request of the session.

        None (or "default") goes back to the agent's `thinking` setting. Returns the
        session's effort now and whether /think chose it, as `session_thinking` does;
        HabakkukError names the levels when LEVEL is not one of them.
        """
        session = await self.sessions.session(session_id)
        state = self.sessions.state_store()
        choice = (level or "").strip().lower()
        if choice in ("", "default"):
            await state.set_setting(session.id, "thinking", None)
            return self.config.agent(session.agent).thinking, False
        known = thinking_level(choice)
        if known is None:
            levels = ", ".join(THINKING_LEVELS)
            raise HabakkukError.said(
                "errors.settings.unknown_level", level=repr(level), levels=levels
            )
        await state.set_setting(session.id, "thinking", known)
        return known, True

    async def session_thinking(self, session_id: str) -> tuple[Thinking, bool]:
        """The session's effort and whether /think chose it (False: the agent's setting)."""
        session = await self.sessions.session(session_id)
        state = self.sessions.state_store()
        chosen = thinking_level(await state.setting(session.id, "thinking"))
        if chosen is not None:
            return chosen, True
        return self.config.agent(session.agent).thinking, False

    def personalities(self) -> list[str]:
        """The personas /personality can choose: the built-ins and the home's files."""
        return personas.choices(self.sessions.home.root)

    async def set_session_personality(self, session_id: str, name: str | None) -> str | None:
        """/personality NAME: the persona appended to the session's system prompt in each
        request (None, "default", "off" or "none" clears it). Returns the persona now;
        HabakkukError names the choices when NAME is not one of them (or not a plain
        name: no path reaches outside the personalities folder)."""
        session = await self.sessions.session(session_id)
        state = self.sessions.state_store()
        choice = (name or "").strip()
        if choice.lower() in ("", *personas.CLEARING):
            await state.set_setting(session.id, "personality", None)
            return None
        known = self.personalities()
        if not personas.valid_name(choice) or choice not in known:
            raise HabakkukError(t("personality.unknown", name=choice, choices=", ".join(known)))
        await state.set_setting(session.id, "personality", choice)
        return choice

    async def session_personality(self, session_id: str) -> str | None:
        """The persona /personality chose for the session, if any."""
        if self._state is None:
            return None
        return await self._state.setting(session_id, "personality")

    async def adopt_legacy_model_choices(self) -> None:
        """Move /model choices an older version kept in usage.db into state.db, beside
        /think (a starting turn reads both in one trip). Idempotent: a crash between the
        two steps only repeats the copy, which never overwrites a newer choice."""
        if self.usage is None or self._state is None:
            return
        legacy = await self.usage.legacy_session_models()
        if legacy:
            await self._state.adopt_settings("model", legacy)
            await self.usage.forget_legacy_session_models(list(legacy))
