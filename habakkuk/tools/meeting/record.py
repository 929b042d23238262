"""A meeting's record under $HABAKKUK_HOME/meetings/<id> (0700): meeting.json (what was
asked and how the attendance goes), transcript.jsonl (one finished caption line per
line), notes.md once written, and the leave file that asks the attendance to leave.

meeting.json is replaced atomically, so a reader never sees half of it; only the one
attendance job writes it after meeting_join created it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from habakkuk.engine import payloads

LEAVE_FILE = "leave"
RECORD_FILE = "meeting.json"
TRANSCRIPT_FILE = "transcript.jsonl"
NOTES_FILE = "notes.md"
_ID = re.compile(r"^mtg_[0-9a-f]{16}$")

# States an attendance goes through; the last three are final.
QUEUED, JOINING, LOBBY, IN_CALL = "queued", "joining", "lobby", "in call"
LEFT, ENDED, FAILED = "left", "ended", "failed"
FINAL = frozenset({LEFT, ENDED, FAILED})


@dataclass(frozen=True)
class Meeting:
    """One attendance: what meeting_join asked, and how it went so far."""

    id: str
    url: str
    platform: str
    agent: str
    name: str  # the guest name shown in the call
    origin: str  # the chat the notes go to ("" for none: the session gets a turn)
    session: str  # the session whose turn asked for it
    created: float
    duration_limit: float  # seconds in the call before leaving
    notes_prompt: str = ""
    state: str = QUEUED
    reason: str = ""  # why it left, ended or failed
    joined_at: float | None = None  # the first join (the time limit counts from it)
    ended_at: float | None = None
    notes: bool = False  # notes.md is written
    delivered: bool = False  # the notes were queued to their chat

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Meeting:
        """The record `data` stores; PayloadError naming the field when it is not one."""
        joined = data.get("joined_at")
        ended = data.get("ended_at")
        return cls(
            id=payloads.text(data, "id"),
            url=payloads.text(data, "url"),
            platform=payloads.text(data, "platform"),
            agent=payloads.text(data, "agent"),
            name=payloads.text(data, "name"),
            origin=payloads.text(data, "origin", ""),
            session=payloads.text(data, "session", ""),
            created=payloads.number(data, "created"),
            duration_limit=payloads.number(data, "duration_limit"),
            notes_prompt=payloads.text(data, "notes_prompt", ""),
            state=payloads.text(data, "state", QUEUED),
            reason=payloads.text(data, "reason", ""),
            joined_at=None if joined is None else payloads.number(data, "joined_at"),
            ended_at=None if ended is None else payloads.number(data, "ended_at"),
            notes=payloads.flag(data, "notes"),
            delivered=payloads.flag(data, "delivered"),
        )


@dataclass(frozen=True)
class Line:
    """One finished line of the transcript: who said it, what, and when its first words
    appeared (epoch seconds)."""

    speaker: str
    text: str
    at: float

    def to_json(self) -> dict[str, Any]:
        """The stored form (one line of transcript.jsonl)."""
        return {"speaker": self.speaker, "text": self.text, "at": self.at}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Line:
        """The line `data` stores."""
        return cls(
            payloads.text(data, "speaker", ""),
            payloads.text(data, "text"),
            payloads.number(data, "at"),
        )


class MeetingStore:
    """The meetings of one home, under `root` ($HABAKKUK_HOME/meetings)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def dir_of(self, meeting_id: str) -> Path:
        """The directory of meeting `meeting_id`; KeyError for a malformed id."""
        if not _ID.match(meeting_id):
            raise KeyError(meeting_id)
        return self.root / meeting_id

    def create(self, meeting: Meeting) -> bool:
        """Write a new meeting's record; False when it exists already (the same call ran
        before), leaving that one as it is."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = self.dir_of(meeting.id)
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if (folder / RECORD_FILE).exists():
                return False
        self.save(meeting)
        return True

    def save(self, meeting: Meeting) -> None:
        """Replace the record atomically."""
        folder = self.dir_of(meeting.id)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".meeting.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(meeting.to_json(), out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, folder / RECORD_FILE)

    def update(self, meeting: Meeting, **changes: Any) -> Meeting:
        """`meeting` with `changes`, saved."""
        changed = replace(meeting, **changes)
        self.save(changed)
        return changed

    def get(self, meeting_id: str) -> Meeting | None:
        """The record of `meeting_id`; None when there is none (or the id is malformed)."""
        try:
            path = self.dir_of(meeting_id) / RECORD_FILE
            return Meeting.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (KeyError, OSError, ValueError):
            return None

    def all(self) -> list[Meeting]:
        """Every readable meeting, newest first."""
        if not self.root.is_dir():
            return []
        found = [self.get(entry.name) for entry in self.root.iterdir()]
        return sorted((m for m in found if m is not None), key=lambda m: -m.created)

    def ask_to_leave(self, meeting_id: str) -> bool:
        """Write the leave file the attendance watches; False for an unknown meeting."""
        if self.get(meeting_id) is None:
            return False
        (self.dir_of(meeting_id) / LEAVE_FILE).touch(mode=0o600)
        return True

    def leave_asked(self, meeting_id: str) -> bool:
        """Whether someone asked the attendance to leave."""
        return (self.dir_of(meeting_id) / LEAVE_FILE).exists()

    def append_lines(self, meeting_id: str, lines: list[Line]) -> None:
        """Append finished lines to the transcript, synced before returning."""
        if not lines:
            return
        path = self.dir_of(meeting_id) / TRANSCRIPT_FILE
        text = "".join(json.dumps(line.to_json(), ensure_ascii=False) + "\n" for line in lines)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def lines(self, meeting_id: str) -> list[Line]:
        """The transcript's lines; a torn last line (a crash mid-write) is skipped."""
        path = self.dir_of(meeting_id) / TRANSCRIPT_FILE
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError:
            return []
        found: list[Line] = []
        for row in raw.splitlines():
            try:
                found.append(Line.from_json(json.loads(row)))
            except ValueError:
                continue
        return found
