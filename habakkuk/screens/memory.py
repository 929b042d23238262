"""The Memory screen: an agent's notes, searched as you type, read as Markdown, edited
(in $EDITOR or inline), forgotten, vouched for; the user profile; each note's history
and the review's open proposals (habakkuk/screens/memory_history.py).

The list is paged: the first page of summaries (no bodies) is all it reads to open, the
next page when the cursor nears the end, and only the highlighted note's body. Every
call goes through the memory (`runtime.memory`, typed as `MemoryAccess`); a
refusal of the service (a secret, a note gone) is a notice, never a crash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Input, Markdown, Static, TextArea

from habakkuk.engine.i18n import t
from habakkuk.knowledge.memory_types import MemoryAccess
from habakkuk.knowledge.memory_views import PARTIAL_MARK, PARTIAL_WORDS
from habakkuk.screens.list_detail import ListDetailScreen, Listing, PaletteEntry
from habakkuk.screens.memory_access import USER
from habakkuk.screens.text_prompt import Confirm
from habakkuk.widgets.fit_table import Cell

if TYPE_CHECKING:
    from textual.timer import Timer

    from habakkuk.knowledge.memory_types import Note, NoteSummary

PAGE = 100  # summaries read per page
NEXT_PAGE_AHEAD = 20  # the next page is read when the cursor comes this close to the end
SEARCH_LIMIT = 100
SEARCH_DELAY = 0.25  # seconds of no typing before a search runs
UNTRUSTED = "(untrusted) "
MATCH_COLUMNS = ("title", "tags", "match")  # a search's columns, while it finds notes


def split_query(text: str) -> tuple[str, tuple[str, ...]]:
    """`#tag` words are tag filters, the rest the search words."""
    words, tags = [], []
    for word in text.split():
        if word.startswith("#") and len(word) > 1:
            tags.append(word[1:])
        else:
            words.append(word)
    return " ".join(words), tuple(tags)


def title_cell(note: NoteSummary) -> Text:
    """A note's title, marked when it is untrusted or read only in part (too big)."""
    title = Text(" ".join(note.title.split()) or note.slug)
    if note.untrusted:
        title = Text.assemble((UNTRUSTED, "bold yellow"), title)
    if note.partial:
        title = Text.assemble(title, (f" {PARTIAL_MARK}", "bold yellow"))
    return title


class NoteEditor(TextArea):
    """The inline editor: F2 saves, Esc cancels (the screen's keys)."""


class MemoryScreen(ListDetailScreen["NoteSummary", "Note"]):
    """Notes of one agent: `/` searches, `e` edits in $EDITOR, `i` inline, `x` forgets
    (asks first), `t` vouches for an untrusted note, `u` shows the user profile, `h` the
    history, `p` the open proposals; Esc leaves a search, then the screen."""

    DEFAULT_CSS = """
    MemoryScreen #note-meta { color: $text-muted; }
    MemoryScreen #note-warning { color: $text-warning; }
    MemoryScreen #note-scroll { height: 1fr; }
    MemoryScreen #note-view { margin: 0 1; }
    MemoryScreen NoteEditor { height: 1fr; }
    MemoryScreen #memory-search { height: 3; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("slash", "search", "Search", id="memory.search"),
        Binding("e", "edit", "Edit", id="memory.edit"),
        Binding("i", "edit_inline", "Edit inline", id="memory.edit_inline"),
        Binding("x", "forget", "Forget", id="memory.forget"),
        Binding("t", "trust", "Trust", id="memory.trust"),
        Binding("h", "history", "History", id="memory.history"),
        Binding("u", "profile", "Profile", id="memory.profile"),
        Binding("p", "proposals", "Proposals", id="memory.proposals"),
        Binding("a", "next_agent", "Agent", id="memory.agent", show=False),
        Binding("f2", "save_inline", "Save", id="memory.save"),
        Binding("escape", "back", "Back", id="memory.back", show=False),
    ]
    SECTION = "Memory"
    PALETTE = (
        PaletteEntry("search", "search", "Search the notes"),
        PaletteEntry("edit", "edit note", "Edit the note in $EDITOR"),
        PaletteEntry("edit_inline", "edit inline", "Edit the note here, F2 saves"),
        PaletteEntry("forget", "forget note", "Move the note to memory/.trash/"),
        PaletteEntry("trust", "trust note", "Vouch for an untrusted note"),
        PaletteEntry("history", "history", "The note's changes, diffs and restore"),
        PaletteEntry("profile", "user profile", "Show USER.md"),
        PaletteEntry("proposals", "proposals", "Apply or dismiss the review's proposals"),
    )
    ITEM = "note"
    COLUMNS = ("title", "tags", "updated")
    # At 80 cells a long title or tag list gives way; the date is never cut.
    SHRINK: ClassVar[dict[str, int]] = {"tags": 6, "match": 12, "title": 12}
    PER_AGENT = True

    def __init__(self) -> None:
        super().__init__(id="memory", title="Memory")
        self.query_text = ""
        self.note: Note | None = None  # the note shown in the pane
        self.showing_profile = False
        self.editing = False
        # Calls are never cancelled midway: the memory records a hand edit it noticed
        # after updating its index, and a cancelled call would lose that record.
        self._paging = False
        self._search_timer: Timer | None = None
        self._search = Input(placeholder=t("tui.memory.search_hint"), id="memory-search")
        self._meta = Static("", id="note-meta", classes="pane-line")
        self._warning = Static("", id="note-warning", classes="pane-line")
        self._view = Markdown("", id="note-view")
        self._scroll = VerticalScroll(self._view, id="note-scroll")
        self._editor = NoteEditor("", id="note-editor", language="markdown", soft_wrap=True)

    # -- the pieces ----------------------------------------------------------------------

    @property
    def memory(self) -> MemoryAccess:
        """The memory, through the app's host."""
        return self.runtime.memory

    @property
    def notes(self) -> list[NoteSummary]:
        """The listed notes, in order."""
        return self.items

    def compose_top(self) -> ComposeResult:
        yield self._search

    def compose_pane(self) -> ComposeResult:
        with Vertical(id="note-pane", classes="list-pane"):
            yield self._meta
            yield self._warning
            yield self._scroll
            yield self._editor

    def on_mount(self) -> None:
        self._warning.display = False
        self._editor.display = False

    def reload_on_resume(self) -> bool:
        return not self.editing

    # -- the list ------------------------------------------------------------------------

    async def listing(self) -> Listing[NoteSummary]:
        memory, agent = self.memory, self.agent
        if not self.query_text:
            page = await self.call(lambda: memory.list_notes(agent, limit=PAGE))
            notes, total = page if page is not None else ([], 0)
            return Listing(
                notes,
                t("tui.title.memory", agent=agent, notes=t("tui.count.notes", count=total)),
                t("tui.empty.memory"),
                total=total,
            )
        words, tags = split_query(self.query_text)
        hits = await self.call(lambda: memory.search(agent, words, tags=tags, limit=SEARCH_LIMIT))
        found = [hit.note for hit in hits or []]
        snippets = {hit.note.slug: " ".join(hit.snippet.split()) for hit in hits or []}

        def cells(note: NoteSummary) -> list[Cell]:
            return [title_cell(note), Text(", ".join(note.tags)), Text(snippets[note.slug])]

        return Listing(
            found,
            t("tui.title.memory_search", agent=agent, query=self.query_text, found=len(found)),
            t("tui.empty.memory_search"),
            columns=MATCH_COLUMNS if found else None,
            cells=cells if found else None,
        )

    def key(self, item: NoteSummary) -> str:
        return item.slug

    def cells(self, item: NoteSummary) -> list[Cell]:
        return [
            title_cell(item),
            Text(", ".join(item.tags)),
            Text(item.updated[:16].replace("T", " ")),
        ]

    @work(group="memory-page")
    async def _next_page(self, generation: int) -> None:
        memory, agent, offset = self.memory, self.agent, len(self.notes)
        try:
            page = await self.call(lambda: memory.list_notes(agent, limit=PAGE, offset=offset))
        finally:
            self._paging = False
        if page is None or generation != self._generation or offset != len(self.notes):
            return
        notes, self.total = page
        self.notes.extend(notes)
        self._table.extend(self.rows(notes))

    def highlighted(self, row: int, item: NoteSummary | None) -> None:
        if (
            not self.query_text
            and not self._paging
            and len(self.notes) < self.total
            and row >= len(self.notes) - NEXT_PAGE_AHEAD
        ):
            self._paging = True
            self._next_page(self._generation)
        if item is not None and not self.editing:
            self.showing_profile = False
            self.read_detail(item)

    def nothing_listed(self) -> None:
        if not self.showing_profile:
            self._show_note(None)

    def agent_changed(self) -> None:
        self.showing_profile = False
        self._show_note(None)

    # -- the pane ------------------------------------------------------------------------

    async def fetch_detail(self, item: NoteSummary) -> Note:
        return await self.memory.read(self.agent, item.slug)

    def show_detail(self, item: NoteSummary | None, detail: Note | None) -> None:
        self._show_note(detail)

    def _show_note(self, note: Note | None) -> None:
        self.note = note
        if note is None:
            self._meta.update("")
            self._warning.display = False
            self._view.update("")
        else:
            parts = [
                note.slug,
                ", ".join(note.tags),
                "updated " + note.updated[:16].replace("T", " "),
            ]
            if note.source:
                parts.append(f"by {note.source}")
            self._meta.update(Content(" · ".join(p for p in parts if p)))
            warnings = []
            if note.untrusted:
                warnings.append(
                    "Untrusted: saved after outside content entered the turn. t vouches."
                )
            if note.partial:
                warnings.append(PARTIAL_WORDS[0].upper() + PARTIAL_WORDS[1:] + ".")
            self._warning.update(Content("\n".join(warnings)))
            self._warning.display = bool(warnings)
            self._view.update(note.body)
        self.refresh_bindings()

    def action_profile(self) -> None:
        """Show the user profile (USER.md) in the pane; `u` again goes back to the note."""
        if self.showing_profile:
            self.showing_profile = False
            note = self.selected()
            if note is not None:
                self.read_detail(note)
            else:
                self._show_note(None)
            return
        self._profile()

    @work(group="memory-note")
    async def _profile(self) -> None:
        self._pane += 1
        pane, memory, agent = self._pane, self.memory, self.agent
        text = await self.call(lambda: memory.profile(agent))
        if text is None or pane != self._pane:
            return
        self.showing_profile = True
        self.note = None
        self._meta.update(Content(f"USER.md · what {agent} knows about you · u: back"))
        self._warning.display = False
        self._view.update(text or "*No profile yet: the agent writes it as it learns about you.*")
        self.refresh_bindings()

    # -- search --------------------------------------------------------------------------

    def action_search(self) -> None:
        self._search.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is not self._search:
            return
        if self._search_timer is not None:
            self._search_timer.stop()
        self._search_timer = self.set_timer(SEARCH_DELAY, self._search_now)

    def _search_now(self) -> None:
        text = self._search.value.strip()
        if text != self.query_text:
            self.query_text = text
            self.reload()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self._search:
            if self._search_timer is not None:
                self._search_timer.stop()
            self._search_now()
            self._table.focus()

    def action_back(self) -> None:
        """Esc: cancel an inline edit; leave the search; else back to the chat."""
        if self.editing:
            self._stop_editing()
            return
        if self.query_text or self.focused is self._search:
            if self._search_timer is not None:
                self._search_timer.stop()
            self._search.value = ""
            self._table.focus()
            if self.query_text:
                self.query_text = ""
                self.reload()
            return
        self.happ.action_go("chat")

    # -- keys ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save_inline":
            return self.editing
        if action == "back":
            return True
        if self.editing or self.focused is self._search:
            return False  # letters type into the editor or the search box
        if action == "trust":
            return self.note is not None and self.note.untrusted
        if action in ("edit", "edit_inline", "forget"):
            return self.note is not None and not self.showing_profile
        if action == "next_agent":
            return self.can_change_agent()
        return True

    # -- forget and trust ----------------------------------------------------------------

    def action_forget(self) -> None:
        """Forget the shown note after a yes (it moves to memory/.trash/)."""
        note = self.note
        if note is None or self.showing_profile:
            return

        def done(yes: bool | None) -> None:
            if yes:
                self._forget(note.slug)

        self.app.push_screen(
            Confirm(f"Forget {note.title!r}? It moves to memory/.trash/, the history keeps it."),
            done,
        )

    @work(group="memory-edit")
    async def _forget(self, slug: str) -> None:
        memory, agent = self.memory, self.agent
        if await self.call(lambda: memory.forget(agent, slug, provenance=USER)) is not None:
            self.notify(t("tui.memory.forgot", slug=slug), markup=False)
            row = self._table.cursor_row
            self.reload()
            self._table.move_cursor(row=row)

    def action_trust(self) -> None:
        """Vouch for the shown untrusted note."""
        note = self.note
        if note is not None and note.untrusted:
            self._trust(note.slug)

    @work(group="memory-edit")
    async def _trust(self, slug: str) -> None:
        memory, agent = self.memory, self.agent
        note = await self.call(lambda: memory.trust(agent, slug, provenance=USER))
        if note is not None:
            self.notify(t("tui.memory.trusted", slug=slug), markup=False)
            self.reload(keep=slug)

    # -- edit ----------------------------------------------------------------------------

    def action_edit(self) -> None:
        """Edit the note's body in $EDITOR (the app steps aside while it runs)."""
        note = self.note
        if note is None or self.showing_profile:
            return
        from habakkuk.screens.memory_editor import edit_in_editor

        edited = edit_in_editor(self.app, note.body, name=note.slug)
        if edited is None:
            return
        if edited.error:
            self.notify(edited.error, severity="error", markup=False)
        elif edited.text == note.body:
            self.notify(t("tui.memory.unchanged"), markup=False)
        else:
            self._save(note, edited.text)

    def action_edit_inline(self) -> None:
        """Edit the note's body here: F2 saves, Esc cancels."""
        note = self.note
        if note is None or self.showing_profile:
            return
        self.editing = True
        self._editor.load_text(note.body)
        self._scroll.display = False
        self._editor.display = True
        self._meta.update(Content(f"Editing {note.slug} · F2 saves · Esc cancels"))
        self._editor.focus()
        self.refresh_bindings()

    def action_save_inline(self) -> None:
        note = self.note
        if not self.editing or note is None:
            return
        text = self._editor.text
        self._stop_editing()
        if text == note.body:
            self.notify(t("tui.memory.unchanged"), markup=False)
        else:
            self._save(note, text)

    def _stop_editing(self) -> None:
        self.editing = False
        self._editor.display = False
        self._scroll.display = True
        self._table.focus()
        self._show_note(self.note)

    @work(group="memory-edit")
    async def _save(self, note: Note, body: str) -> None:
        memory, agent = self.memory, self.agent
        saved = await self.call(
            lambda: memory.replace(agent, note.slug, note.title, body, provenance=USER)
        )
        if saved is None:
            return
        if saved.unchanged:
            self.notify(t("tui.memory.unchanged"), markup=False)
        else:
            self.notify(t("tui.memory.saved", slug=saved.note.slug), markup=False)
        self.reload(keep=saved.note.slug)
        if self.selected_id() == saved.note.slug:
            self._show_note(saved.note)

    # -- history and proposals -----------------------------------------------------------

    def action_history(self) -> None:
        """The shown note's (or the profile's) changes, each with its diff and restore."""
        from habakkuk.screens.memory_history import HistoryScreen

        if self.showing_profile:
            name, label = "USER.md", "USER.md"
        elif self.note is not None:
            name, label = self.note.slug, self.note.title
        else:
            return
        self.app.push_screen(HistoryScreen(self.memory, self.agent, name, label))

    def action_proposals(self) -> None:
        """The review's open proposals: apply or dismiss each."""
        from habakkuk.screens.memory_history import ProposalsScreen

        self.app.push_screen(ProposalsScreen(self.memory, self.agent))
