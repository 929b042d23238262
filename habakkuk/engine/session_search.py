"""Session search: the newest matches of a query, the best of them first.

Ranking every match with FTS5's bm25() made a search grow with the history: bm25 counts
every message holding each query word before it scores one (6.5 ms for a word found in
440,000 messages, 14-36 ms a search on a home of 1,000,000 messages). Search reads a
window of recent matches instead and orders them by what the window itself holds, with
no statistics over the whole table:

1. messages holding the query's words together, as typed (one phrase), first: for a
   query of two words or more that is not already one quoted phrase;
2. then the shorter message first (the words weigh more in it: bm25's order for a word
   found once, without its counts over the whole history);
3. then the newest first.

A query is words, each found anywhere in the message (all of them), or "quoted phrases",
found as written. The window is the newest SEARCH_WINDOW messages holding every word of
the query, quoted or not (a walk back over FTS5's lists of rows, no positions read); the
messages of the window that match the query (its phrases as written) are ranked. So a
rare word, or a phrase holding one, reaches back through all of the history, while a
common word stays within its newest SEARCH_WINDOW matches and a phrase of common words
within the newest SEARCH_WINDOW messages holding all of its words: a phrase is checked
word position by word position, and checking it over every message holding its words
grew with the history (27 ms for "garden tomato" on 1,000,000 messages, 1.4 ms on 10,000;
21 ms for a phrase of three common words found 8 times in the small home).

A query of several words one of which is rare, found in RARE_MESSAGES messages or fewer
(within RARE_CHARS characters), is checked on those messages alone, in a small FTS5
index of their text (search_probe.py): all of its matches are in the window. FTS5 on
message_fts checked the other words through their lists of rows, from the newest of
those messages to the oldest, twice (the window, then the phrase): a page of a common
word's list for each of them once they lie far apart ("zephyr garden", a word in 40
messages and one in 44 %, read 70 more pages on 1,000,000 messages than on 10,000,
where ten pages of "garden" held them all; 7.5 ms against 1.4 ms after other searches
had filled the page cache). Reading the few messages costs the same on any home.

The snippet is built in Python from the message's first characters (snippets.py): FTS5's
snippet() took 9 ms for one 8,000-character message of one repeated word.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from habakkuk.engine.sql import Conn

from .search_probe import probe_matches
from .snippets import Highlighter, opening

# Search ranks the matches among the newest this many messages holding every word of the
# query (its cost grows with it, not with the history).
SEARCH_WINDOW = 2_000
# A query of several words is checked on the messages of its first rare word alone, one
# found in at most RARE_MESSAGES messages, of RARE_CHARS characters in all: the
# probe's cost is their text (0.6 ms for 100 messages of 1,000 characters, the most it
# indexes), the walk's a page of the other words' lists for each of them.
RARE_MESSAGES = 100
RARE_CHARS = 100_000
SNIPPET_WORDS = 12  # as snippet(message_fts, 0, '[', ']', '…', 12) showed
_TOKEN = re.compile(r"\S+")


@dataclass
class SearchHit:
    session: str
    agent: str
    title: str
    seq: int
    role: str
    at: float
    snippet: str


@dataclass(frozen=True)
class SearchQuery:
    """A search as FTS5 reads it: `match` is each word and each quoted phrase as an FTS5
    string (FTS5 requires all of them); `every` is each word alone, quoted or not (the
    window: a message matching `match` matches `every`; "" when it is `match`);
    `together` is every word as one phrase, the first tier of the order ("" when it would
    say nothing more than `match`); `singles` is each word alone as an FTS5 string, for a
    query of several words (a message matching `match` matches each of them)."""

    match: str
    together: str
    words: str  # the query's words, for the snippet's highlighter
    every: str = ""
    singles: tuple[str, ...] = ()


def _fts_string(words: list[str]) -> str:
    """`words` as one FTS5 string (a phrase when there are several): no syntax inside."""
    return '"' + " ".join(words) + '"'


@dataclass(frozen=True)
class QueryTerm:
    """One term of a query, all of which a match holds: a word, or a quoted phrase's
    words (found together, as written)."""

    words: tuple[str, ...]
    quoted: bool


def query_terms(text: str) -> list[QueryTerm]:
    """The query's words and "quoted phrases", in order; a quote left open counts as a
    space (each engine then reads every term as plain words, never as its syntax)."""
    parts = text.replace("\x00", " ").split('"')
    if len(parts) % 2 == 0:  # an unmatched quote: the last one is a space
        parts[-2:] = [parts[-2] + " " + parts[-1]]
    terms: list[QueryTerm] = []
    for index, part in enumerate(parts):
        words = _TOKEN.findall(part)
        if not words:
            continue
        if index % 2:  # inside quotes: one phrase
            terms.append(QueryTerm(tuple(words), quoted=True))
        else:
            terms += [QueryTerm((word,), quoted=False) for word in words]
    return terms


def parse_query(text: str) -> SearchQuery:
    """The query as FTS5 strings (query_terms): every word is inside an FTS5 string, so
    no input is FTS5 syntax."""
    terms: list[str] = []
    phrases = 0
    every: list[str] = []
    for term in query_terms(text):
        every += term.words
        terms.append(_fts_string(list(term.words)))
        phrases += term.quoted
    one_phrase = phrases == 1 and len(terms) == 1
    together = _fts_string(every) if len(every) > 1 and not one_phrase else ""
    match = " ".join(terms)
    singles = tuple(_fts_string([word]) for word in every)
    alone = " ".join(singles)
    return SearchQuery(
        match,
        together,
        " ".join(every),
        "" if alone == match else alone,
        singles if len(singles) > 1 else (),
    )


def search_messages(
    conn: Conn,
    query: str,
    *,
    agent: str | None = None,
    limit: int = 20,
    window: int = SEARCH_WINDOW,
    rare: int = RARE_MESSAGES,
) -> list[SearchHit]:
    """The best `limit` of the messages matching `query` among the newest `window`
    messages (of `agent`) holding every word of it, in the order the module's docstring
    gives. A query of several words, one of them found in `rare` messages or fewer, is
    checked on those messages alone (0: never)."""
    parsed = parse_query(query)
    if not parsed.match:
        return []
    if parsed.singles and min(rare, window) > 0:
        hits = _search_rare(conn, parsed, agent, min(rare, window), limit)
        if hits is not None:
            return hits
    mine = " AND s.agent = ?" if agent else ""
    of_agent = [agent] if agent else []
    matches = (
        " FROM message_fts JOIN message_text t ON t.message_id = message_fts.rowid"
        f" JOIN sessions s ON s.id = t.session_id WHERE message_fts MATCH ?{mine}"
    )
    oldest = 0
    if parsed.every:
        # A phrase: the window's oldest message holding every word (FTS5 intersects its
        # lists of rows without reading positions); the phrase is checked from there on.
        # Of every agent, the index alone: its rows are message_text's (the triggers),
        # and joining 2,000 rows to read nothing cost more than the walk itself.
        reach = matches if agent else " FROM message_fts WHERE message_fts MATCH ?"
        found = conn.execute(
            f"SELECT message_fts.rowid{reach} ORDER BY message_fts.rowid DESC LIMIT 1 OFFSET ?",
            (parsed.every, *of_agent, window - 1),
        ).fetchone()
        oldest = 0 if found is None else int(found[0])
    params: list[object] = [parsed.match, *of_agent, oldest, window]
    # The window: the newest matches by rowid (FTS5 walks its lists backwards and stops),
    # with the message's length; no bm25(), whose statistics cover every match.
    sql = (
        "WITH recent AS MATERIALIZED (SELECT message_fts.rowid AS id, length(t.text) AS size"
        f"{matches} AND message_fts.rowid >= ? ORDER BY message_fts.rowid DESC LIMIT ?)"
    )
    tier = "0"
    if parsed.together:
        # The phrase among the window's rows only: its rowids from the window's oldest on.
        sql += (
            ", together AS MATERIALIZED (SELECT rowid AS id FROM message_fts"
            " WHERE message_fts MATCH ? AND rowid >= (SELECT min(id) FROM recent))"
        )
        params.append(parsed.together)
        tier = "recent.id IN together"
    sql += (
        f", best AS MATERIALIZED (SELECT id, {tier} AS tier, size FROM recent"
        " ORDER BY tier DESC, size, id DESC LIMIT ?)"
        " SELECT t.session_id, s.agent, s.title, t.seq, t.role, m.created_at, t.text"
        " FROM best JOIN message_text t ON t.message_id = best.id"
        " JOIN sessions s ON s.id = t.session_id JOIN messages m ON m.id = best.id"
        " ORDER BY best.tier DESC, best.size, best.id DESC"
    )
    params.append(limit)
    # Plain tuples, not rows by name: this reads up to thousands of rows (SQLite only:
    # PostgreSQL's search is its own module, session_search_pg.py).
    cursor = cast(sqlite3.Connection, conn).cursor()
    cursor.row_factory = None
    return search_hits(cursor.execute(sql, params).fetchall(), parsed.words)


def _search_rare(
    conn: Conn, parsed: SearchQuery, agent: str | None, most: int, limit: int
) -> list[SearchHit] | None:
    """The search on the messages of the query's first rare word, one found in `most`
    messages or fewer (at most the window, so every match is in it) of RARE_CHARS
    characters in all; None when no word is that rare. A word found in none is left to
    the walk: FTS5 ignores a string without a token (found in none alone) in a query."""
    cursor = cast(sqlite3.Connection, conn).cursor()
    cursor.row_factory = None
    # Its first `most` + 1 messages at most: a common word's walk stops there. Oldest
    # first, FTS5's own order: a walk back first finds each segment's last page of the
    # word's list (27 pages read for "garden" on 1,000,000 messages, 19 this way).
    first = "SELECT rowid FROM message_fts WHERE message_fts MATCH ? LIMIT ?"
    fewest: list[int] = []
    for single in dict.fromkeys(parsed.singles):
        # The first rare word will do: each walk seeks the word in every segment of
        # the index (17 on a home of 1,000,000 messages, 8 on 10,000).
        fewest = [int(r[0]) for r in cursor.execute(first, (single, most + 1))]
        if 0 < len(fewest) <= most:
            break
    else:
        return None
    mine = " AND s.agent = ?" if agent else ""
    # Each message once: what a hit shows but its time (messages' row) comes along.
    rows = {
        int(r[0]): r[1:]
        for r in cursor.execute(
            "SELECT t.message_id, length(t.text), t.text, t.session_id, s.agent, s.title,"
            " t.seq, t.role FROM message_text t JOIN sessions s ON s.id = t.session_id"
            f" WHERE t.message_id IN ({', '.join('?' * len(fewest))}){mine}",
            [*fewest, *([agent] if agent else [])],
        )
    }
    if sum(len(row[1]) for row in rows.values()) > RARE_CHARS:
        return None
    matching, together = probe_matches(
        [(id_, str(row[1])) for id_, row in rows.items()], [parsed.match, parsed.together]
    )
    # The module's order: the phrase first, then the shorter, then the newest.
    best = sorted(matching, key=lambda id_: (id_ not in together, rows[id_][0], -id_))[:limit]
    if not best:
        return []
    at = dict(
        cursor.execute(
            f"SELECT id, created_at FROM messages WHERE id IN ({', '.join('?' * len(best))})",
            best,
        ).fetchall()
    )
    hits = [(*rows[id_][2:], at[id_], rows[id_][1]) for id_ in best if id_ in at]
    return search_hits(hits, parsed.words)


def search_hits(rows: Sequence[Sequence[Any]], words: str) -> list[SearchHit]:
    """The hits of ranked rows (session, agent, title, seq, role, created_at, text), each
    with its snippet: a few words around the first of `words` found, in [brackets]."""
    highlighter = Highlighter(words, stem=False)
    return [
        SearchHit(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            highlighter.snippet(r[6], tokens=SNIPPET_WORDS) or opening(r[6], SNIPPET_WORDS),
        )
        for r in rows
    ]
