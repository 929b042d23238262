"""The chat's status line: agent, model, session, mode, tokens (and cost when known), queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content
from textual.widgets import Static

from habakkuk.engine.i18n import current_language, t


@dataclass
class Status:
    """What the status line shows; unknown parts are left out."""

    agent: str = ""
    model: str = ""
    session: str = ""
    mode: str = ""
    # The reasoning effort; shown only when it is on.
    thinking: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    running: bool = False
    queued: int = 0
    goal: str = ""  # the session's running /goal ("goal 3/10")
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # The language of its words: the one in use where it was made (the screen's task),
    # since it is drawn wherever Textual renders, or read back by a test.
    language: str = field(default_factory=current_language)

    def parts(self) -> list[tuple[str, str]]:
        """(text, style) pieces in display order."""
        pieces: list[tuple[str, str]] = []
        if self.note:
            pieces.append((self.note, "italic"))
            return pieces
        pieces.append((self.agent, "bold"))
        if self.model:
            pieces.append((self.model, ""))
        if self.thinking and self.thinking != "off":
            pieces.append((t("tui.status.think", language=self.language, effort=self.thinking), ""))
        pieces.append((self.session or t("tui.status.new_session", language=self.language), ""))
        if self.mode:
            pieces.append((self._mode(), ""))
        if self.input_tokens or self.output_tokens:
            tokens = t(
                "tui.status.tokens",
                language=self.language,
                input=_k(self.input_tokens),
                output=_k(self.output_tokens),
            )
            pieces.append((tokens, ""))
        if self.cost is not None:
            pieces.append((f"${self.cost:.4f}", ""))
        if self.goal:
            pieces.append((self.goal, "bold"))
        if self.running:
            state = t("tui.status.running", language=self.language)
            if self.queued:
                state += ", " + t("tui.status.queued", language=self.language, count=self.queued)
            pieces.append((state, "bold"))
        elif self.queued:
            pieces.append(
                (t("tui.status.queued", language=self.language, count=self.queued), "bold")
            )
        else:
            pieces.append((t("tui.status.idle", language=self.language), "dim"))
        return pieces

    def _mode(self) -> str:
        return t("tui.status.mode", language=self.language, mode=self.mode)

    def fitted(self, width: int) -> list[tuple[str, str]]:
        """The parts shortened to fit `width` cells, least useful first.

        The session title shrinks (to 8 cells), then the mode goes and the title
        takes the room back, then the title goes, then the model shrinks: the
        agent and the run state are what a glance looks for.
        """
        pieces = self.parts()
        if self.note or width <= 0 or _width(pieces) <= width:
            return pieces
        # After the agent, the model and the /think effort, when they are shown.
        title_at = 1 + bool(self.model) + bool(self.thinking and self.thinking != "off")
        if _shorten(pieces, title_at, width, least=8):
            return pieces
        pieces = [p for p in self.parts() if p != (self._mode(), "")]
        if _shorten(pieces, title_at, width, least=8):
            return pieces
        del pieces[title_at]
        if self.model:
            _shorten(pieces, 1, width, least=10)
        return pieces


def _shorten(pieces: list[tuple[str, str]], index: int, width: int, *, least: int) -> bool:
    """Cut pieces[index] (keeping `least` cells and an ellipsis) so all fit; False if none can."""
    text, style = pieces[index]
    over = _width(pieces) - width
    if over <= 0:
        return True
    keep = len(text) - over - 1
    if keep < least:
        return False
    pieces[index] = (text[:keep].rstrip() + "…", style)
    return True


def _width(pieces: list[tuple[str, str]]) -> int:
    """Cells taken by the pieces joined with " · "."""
    return sum(len(text) for text, _ in pieces) + 3 * max(0, len(pieces) - 1)


def _k(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 10_000 else str(count)


class StatusLine(Static):
    """One line at the top of the chat."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $panel; color: $text; }
    """

    def __init__(self) -> None:
        super().__init__("")
        self.status = Status(note=t("tui.status.starting"))

    def on_mount(self) -> None:
        self.show(self.status)

    def show(self, status: Status) -> None:
        """Redraw from `status` (names are data: never markup)."""
        self.status = status
        self.refresh()

    def render(self) -> Content:
        pieces: list[Content | tuple[str, str] | str] = []
        for index, (text, style) in enumerate(self.status.fitted(self.content_size.width)):
            if index:
                pieces.append((" · ", "dim"))
            pieces.append((text, style) if style else Content(text))
        return Content.assemble(*pieces)
