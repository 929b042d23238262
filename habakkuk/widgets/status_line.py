"""The chat's status line: agent, model, session, mode, tokens (and cost when known), queue."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content
from textual.widgets import Static


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
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)

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
            pieces.append((f"think {self.thinking}", ""))
        pieces.append((self.session or "new session", ""))
        if self.mode:
            pieces.append((f"mode {self.mode}", ""))
        if self.input_tokens or self.output_tokens:
            pieces.append((f"{_k(self.input_tokens)} in / {_k(self.output_tokens)} out", ""))
        if self.cost is not None:
            pieces.append((f"${self.cost:.4f}", ""))
        if self.running:
            state = "running" + (f", {self.queued} queued" if self.queued else "")
            pieces.append((state, "bold"))
        elif self.queued:
            pieces.append((f"{self.queued} queued", "bold"))
        else:
            pieces.append(("idle", "dim"))
        return pieces


def _k(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 10_000 else str(count)


class StatusLine(Static):
    """One line at the top of the chat."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $panel; color: $text; }
    """

    def __init__(self) -> None:
        super().__init__("")
        self.status = Status(note="starting…")

    def on_mount(self) -> None:
        self.show(self.status)

    def show(self, status: Status) -> None:
        """Redraw from `status` (names are data: never markup)."""
        self.status = status
        pieces: list[Content | tuple[str, str] | str] = []
        for index, (text, style) in enumerate(status.parts()):
            if index:
                pieces.append((" · ", "dim"))
            pieces.append((text, style) if style else Content(text))
        self.update(Content.assemble(*pieces))

    @property
    def plain(self) -> str:
        return " · ".join(text for text, _ in self.status.parts())
