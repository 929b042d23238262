"""meeting_join's links: only Meet, Zoom and Teams hosts, Zoom's /j/ID as the web client."""

from __future__ import annotations

import pytest

from habakkuk.tools.meeting.links import NotAMeeting, normalise


@pytest.mark.parametrize(
    ("link", "url", "platform"),
    [
        ("https://meet.google.com/abc-defg-hij", "https://meet.google.com/abc-defg-hij", "meet"),
        (
            "meet.google.com/abc-defg-hij?authuser=1",
            "https://meet.google.com/abc-defg-hij?authuser=1",
            "meet",
        ),
        (
            "https://zoom.us/j/81234567890?pwd=xyz",
            "https://zoom.us/wc/join/81234567890?pwd=xyz",
            "zoom",
        ),
        (
            "https://us02web.zoom.us/j/81234567890",
            "https://us02web.zoom.us/wc/join/81234567890",
            "zoom",
        ),
        ("https://zoom.us/wc/join/81234567890", "https://zoom.us/wc/join/81234567890", "zoom"),
        (
            "https://teams.microsoft.com/l/meetup-join/19%3ameeting_x/0",
            "https://teams.microsoft.com/l/meetup-join/19%3ameeting_x/0",
            "teams",
        ),
        (
            "https://teams.live.com/meet/9876543210",
            "https://teams.live.com/meet/9876543210",
            "teams",
        ),
        (
            "https://teams.cloud.microsoft/meet/123",
            "https://teams.cloud.microsoft/meet/123",
            "teams",
        ),
        ("HTTPS://MEET.GOOGLE.COM/abc-defg-hij#x", "https://meet.google.com/abc-defg-hij", "meet"),
    ],
)
def test_a_meeting_link_is_accepted_in_its_normal_form(link: str, url: str, platform: str) -> None:
    found = normalise(link)
    assert (found.url, found.platform) == (url, platform)


@pytest.mark.parametrize(
    "link",
    [
        "https://example.com/meet",
        "https://meet.google.com.evil.example/abc-defg-hij",
        "https://evilzoom.us/j/123456789",
        "https://zoom.us.example.net/j/123456789",
        "https://teams.microsoft.com.example/x",
        "https://user:pw@meet.google.com/abc-defg-hij",
        "ftp://meet.google.com/abc-defg-hij",
        "javascript:alert(1)",
        "https://meet.google.com/",
        "https://meet.google.com:8443/abc-defg-hij",
        "http://127.0.0.1/abc",
    ],
)
def test_anything_but_a_meeting_link_is_refused(link: str) -> None:
    with pytest.raises(NotAMeeting):
        normalise(link)
