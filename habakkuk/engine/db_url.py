"""Database URLs as people may see them: never with their password."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# Query parameters libpq reads a secret from.
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


def redact(url: str) -> str:
    """`url` with its password replaced by `***` wherever libpq would read one: after the
    user name (even an empty one, even a password holding `@`) and in the query."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a database URL that cannot be read>"
    netloc = parts.netloc
    if "@" in netloc:
        # The last @ ends the credentials: a password may hold an @ itself.
        credentials, _, where = netloc.rpartition("@")
        user, colon, _password = credentials.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{where}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(key, "***" if key.lower() in _SECRET_PARAMS else value) for key, value in pairs],
            safe="*",
        )
    return urlunsplit(parts._replace(netloc=netloc, query=query))
