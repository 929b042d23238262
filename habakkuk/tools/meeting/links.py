"""Which links meeting_join accepts, and their normal form.

Only Google Meet, Zoom (zoom.us and its subdomains) and Microsoft Teams (teams.microsoft.com,
teams.live.com, teams.cloud.microsoft) links are meetings; anything else is refused, so the
toolset cannot be used to browse. A Zoom /j/ID link becomes the web client's /wc/join/ID,
which joins in the browser instead of asking to open the app.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

MEET, ZOOM, TEAMS = "meet", "zoom", "teams"
_TEAMS_HOSTS = frozenset({"teams.microsoft.com", "teams.live.com", "teams.cloud.microsoft"})
_ZOOM_JOIN = re.compile(r"^/j/(\d+)/?$")


class NotAMeeting(ValueError):
    """The link is not a meeting of a supported platform; the message says why."""


@dataclass(frozen=True)
class MeetingLink:
    """A meeting link in its normal form, and its platform (meet, zoom or teams)."""

    url: str
    platform: str


def platform_of(host: str) -> str | None:
    """The platform a host name belongs to; None for any other host."""
    host = host.lower().rstrip(".")
    if host == "meet.google.com":
        return MEET
    if host == "zoom.us" or host.endswith(".zoom.us"):
        return ZOOM
    if host in _TEAMS_HOSTS:
        return TEAMS
    return None


def normalise(link: str) -> MeetingLink:
    """`link` as the attendance opens it; NotAMeeting for any other link."""
    text = link.strip()
    if "://" not in text:
        text = "https://" + text
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("https", "http"):
        raise NotAMeeting(f"{link!r} is not a web link")
    if parts.username or parts.password:
        raise NotAMeeting(f"{link!r} carries credentials")
    host = (parts.hostname or "").lower()
    platform = platform_of(host)
    if platform is None:
        raise NotAMeeting(
            f"{host or link!r} is not a Google Meet, Zoom or Microsoft Teams meeting host"
        )
    if parts.port not in (None, 443):
        raise NotAMeeting(f"{link!r} names a port; meeting links do not")
    path = parts.path or "/"
    if path == "/":
        raise NotAMeeting(f"{link!r} is the platform's home page, not a meeting")
    found = _ZOOM_JOIN.match(path) if platform == ZOOM else None
    if found is not None:
        path = f"/wc/join/{found.group(1)}"
    return MeetingLink(urlunsplit(("https", host, path, parts.query, "")), platform)
