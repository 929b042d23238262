"""Session search on PostgreSQL: session_search.py's rules over a tsvector and its GIN index.

message_text's `words` column (sessions.py, PG_MIGRATIONS) is the message's text as
FTS5's unicode61 tokenizer reads it, as near as PostgreSQL's parser allows: every run of
characters that are not letters or digits becomes a space (`search_words`), so a host
name, an e-mail address, a hyphenated word or a number with a point is its words, as in
FTS5, rather than one token of PostgreSQL's parser; then the 'simple' configuration
folds case and stems nothing. Diacritics are dropped as FTS5's remove_diacritics drops
them ("cafe" finds "café"): the text is decomposed (NFD) and its combining marks removed
(transcripts' PostgreSQL migration 2, on a UTF8 server).

A query is read by the same `query_terms` as on SQLite, each term a
`phraseto_tsquery` of its words (a word alone is a phrase of one), all of them required
(`&&`); a term without a letter or digit is no term, as an FTS5 string with no token
says nothing. The order is session_search.py's, with the same window:

1. the window is the newest SEARCH_WINDOW messages (of the agent) matching the query,
   by message id; with a quoted phrase, first the newest SEARCH_WINDOW holding every
   word (no positions read), and the phrase is checked from the oldest of those on;
2. in the window, the messages holding all the query's words as one phrase first,
   then the shorter message, then the newest.

The hits are the same as FTS5's wherever both engines read the words alike. The cost
stays bounded as on SQLite: for a common word PostgreSQL walks the primary key back
from the newest message and stops at the window (the planner sees the word's frequency
in the column's statistics), for a rare one it reads the word's entries in the GIN
index; no ranking function (ts_rank_cd counts every match's positions) is computed.
"""

from __future__ import annotations

import re
from typing import Any

from habakkuk.engine.sql import Conn

from .session_search import SEARCH_WINDOW, SearchHit, query_terms, search_hits

_HAS_TOKEN = re.compile(r"[^\W_]")  # a letter or a digit: what makes a token


def _tsquery(count: int) -> str:
    """The SQL of a tsquery requiring `count` phrases, each given as a parameter."""
    one = "phraseto_tsquery('simple', search_words(?))"
    return "(" + " && ".join([one] * count) + ")"


def search_messages_pg(
    conn: Conn,
    query: str,
    *,
    agent: str | None = None,
    limit: int = 20,
    window: int = SEARCH_WINDOW,
) -> list[SearchHit]:
    """session_search.search_messages on PostgreSQL (the module docstring says how)."""
    terms = [
        " ".join(term.words)
        for term in query_terms(query)
        if any(_HAS_TOKEN.search(word) for word in term.words)
    ]
    if not terms:
        return []
    words = [word for term in terms for word in term.split() if _HAS_TOKEN.search(word)]
    quoted = any(len(term.split()) > 1 for term in terms)
    mine = " AND s.agent = ?" if agent else ""
    of_agent: list[Any] = [agent] if agent else []
    joined = " JOIN sessions s ON s.id = t.session_id" if agent else ""
    newest = (
        "SELECT t.message_id AS id, length(t.text) AS size, t.words FROM message_text t"
        f"{joined} WHERE t.words @@ {{}}{mine} ORDER BY t.message_id DESC LIMIT ?"
    )
    if quoted:
        # The newest `window` messages holding every word (no positions read), and of
        # those the ones holding the phrases: the same rows as FTS5's window from the
        # oldest of them on, in one walk back.
        every = newest.format(_tsquery(len(words)))
        sql = (
            f"WITH recent AS MATERIALIZED (SELECT * FROM ({every}) w"
            f" WHERE w.words @@ {_tsquery(len(terms))})"
        )
        params: list[Any] = [*words, *of_agent, window, *terms]
    else:
        sql = f"WITH recent AS MATERIALIZED ({newest.format(_tsquery(len(terms)))})"
        params = [*terms, *of_agent, window]
    one_phrase = len(terms) == 1 and quoted
    tier, ranked = "0", "recent"
    if len(words) > 1 and not one_phrase:
        # The phrase of every word, checked on the window's rows only (their words
        # came along: a join would let the planner read every message holding it).
        sql += f", phrase AS MATERIALIZED (SELECT {_tsquery(1)} AS q)"
        params.append(" ".join(words))
        tier = "CASE WHEN recent.words @@ phrase.q THEN 1 ELSE 0 END"
        ranked = "recent, phrase"
    sql += (
        f", best AS MATERIALIZED (SELECT id, {tier} AS tier, size FROM {ranked}"
        " ORDER BY tier DESC, size, id DESC LIMIT ?)"
        " SELECT t.session_id, s.agent, s.title, t.seq, t.role, m.created_at, t.text"
        " FROM best JOIN message_text t ON t.message_id = best.id"
        " JOIN sessions s ON s.id = t.session_id JOIN messages m ON m.id = best.id"
        " ORDER BY best.tier DESC, best.size, best.id DESC"
    )
    params.append(limit)
    return search_hits(conn.execute(sql, params).fetchall(), " ".join(words))
