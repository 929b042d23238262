"""An email account's own state: where it is in the mailbox, and the threads it is in.

Kept in `channels/email-<account>.json` (0600, replaced atomically):
- the position: the mailbox's UIDVALIDITY and the last UID handed to the gateway
  (written only after a batch was handed over, so a crash replays at most one batch,
  which the gateway drops by Message-ID);
- the threads: for each conversation (a thread, keyed by a digest of its root
  Message-ID) its subject and newest message, and for each message we saw or sent the
  thread it is in and its References chain, so a reply carries In-Reply-To and
  References as a mail client expects. The oldest messages are forgotten past a bound;
  a reply to a forgotten one still finds its thread through its References' root.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from habakkuk.engine.home import write_private_file

MAX_MESSAGES = 2000  # messages remembered (thread and references) before the oldest go
MAX_REFERENCES = 20  # a References chain keeps its root and its newest ids


@dataclass
class Thread:
    """One conversation: the subject it started with and the newest message in it."""

    subject: str
    last: str = ""  # the newest Message-ID (ours or theirs), for In-Reply-To


@dataclass
class Known:
    """A message of a thread: which thread, and the References it carried."""

    thread: str
    references: list[str] = field(default_factory=list)


@dataclass
class EmailState:
    """The position and threads of one account (see the module docstring)."""

    uidvalidity: int = 0  # 0: never positioned (the first start takes the current one)
    last_uid: int = 0
    threads: dict[str, Thread] = field(default_factory=dict)
    messages: dict[str, Known] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> EmailState:
        """The state saved at `path`; a fresh one when there is none. A file that is not
        ours raises ValueError naming it."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not an email state file ({exc})") from None
        try:
            return cls(
                uidvalidity=int(data["uidvalidity"]),
                last_uid=int(data["last_uid"]),
                threads={
                    key: Thread(str(t["subject"]), str(t.get("last", "")))
                    for key, t in data.get("threads", {}).items()
                },
                messages={
                    mid: Known(str(m["thread"]), [str(r) for r in m.get("references", [])])
                    for mid, m in data.get("messages", {}).items()
                },
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: not an email state file (bad {exc})") from None

    def save(self, path: Path) -> None:
        """Write the state to `path` atomically, 0600."""
        write_private_file(path, self.dumps())

    def dumps(self) -> str:
        """The state as the file's JSON (taken on the event loop: the adapter writes the
        text in a thread while sends go on changing the threads)."""
        data = {
            "uidvalidity": self.uidvalidity,
            "last_uid": self.last_uid,
            "threads": {k: {"subject": t.subject, "last": t.last} for k, t in self.threads.items()},
            "messages": {
                mid: {"thread": m.thread, "references": m.references}
                for mid, m in self.messages.items()
            },
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def thread_of(self, message_id: str, in_reply_to: str, references: list[str]) -> str:
        """The thread key of an incoming message: the thread of the message it answers
        (or of the newest one it references that we know), else the digest of its
        References' root, else a new thread rooted at the message itself."""
        for parent in [in_reply_to, *reversed(references)]:
            known = self.messages.get(parent) if parent else None
            if known is not None:
                return known.thread
        root = references[0] if references else in_reply_to or message_id
        return thread_key(root)

    def remember(self, message_id: str, thread: str, references: list[str], subject: str) -> None:
        """Record a message (seen or sent) as the newest of `thread`."""
        chain = references[:1] + references[1:][-(MAX_REFERENCES - 1) :]
        self.messages.pop(message_id, None)
        self.messages[message_id] = Known(thread, chain)
        while len(self.messages) > MAX_MESSAGES:
            del self.messages[next(iter(self.messages))]
        current = self.threads.pop(thread, None) or Thread(subject)
        current.last = message_id
        self.threads[thread] = current  # re-inserted: the newest threads last
        while len(self.threads) > MAX_MESSAGES:
            del self.threads[next(iter(self.threads))]

    def reply_headers(self, thread: str, reply_to: str | None) -> tuple[str, list[str]]:
        """In-Reply-To and References for a message in `thread`, answering `reply_to`
        when we know it, else the thread's newest message ("" and [] for neither)."""
        parent = reply_to if reply_to and reply_to in self.messages else ""
        if not parent:
            known = self.threads.get(thread)
            parent = known.last if known is not None else ""
        if not parent:
            return "", []
        earlier = self.messages[parent].references if parent in self.messages else []
        return parent, [*earlier, parent]


def thread_key(root_message_id: str) -> str:
    """The conversation key of a thread: a digest of its root Message-ID (an address's
    thread part may not hold the colons and brackets a Message-ID can)."""
    return "t" + hashlib.sha256(root_message_id.encode()).hexdigest()[:16]
