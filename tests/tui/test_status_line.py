"""The status line fits its width: a long session title gives way, the run state never does."""

from __future__ import annotations

from textual.app import App, ComposeResult

from habakkuk.widgets.status_line import Status, StatusLine

LONG = Status(
    agent="habakkuk",
    model="anthropic/claude-sonnet-4-5",
    session="please refactor the whole billing module and write the migration notes",
    mode="workspace",
    input_tokens=12_345,
    output_tokens=678,
    running=True,
    queued=2,
)


def test_a_status_that_fits_is_shown_whole() -> None:
    short = Status(agent="a", model="m", session="hi", mode="ask")
    assert short.fitted(80) == short.parts()


def test_a_long_title_is_shortened_so_the_run_state_stays_visible() -> None:
    pieces = LONG.fitted(120)
    text = " · ".join(t for t, _ in pieces)
    assert len(text) <= 120
    assert text.endswith("running, 2 queued")
    assert "please refactor" in text and "…" in text
    assert "mode workspace" in text


def test_when_even_a_short_title_does_not_fit_the_mode_goes_too() -> None:
    text = " · ".join(t for t, _ in LONG.fitted(78))
    assert "mode workspace" not in text
    assert text.endswith("running, 2 queued")


def test_the_title_gives_way_before_the_think_effort() -> None:
    import dataclasses

    thinking = dataclasses.replace(LONG, thinking="high")
    text = " · ".join(t for t, _ in thinking.fitted(120))
    assert "think high" in text and "please refactor" in text and "…" in text
    assert text.endswith("running, 2 queued") and len(text) <= 120


async def test_the_widget_renders_the_fitted_line_at_its_width() -> None:
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield StatusLine()

    app = One()
    async with app.run_test(size=(80, 5)) as pilot:
        line = app.query_one(StatusLine)
        line.show(LONG)
        await pilot.pause()
        rendered = str(line.render())
        assert rendered.endswith("running, 2 queued")
        assert len(rendered) <= line.content_size.width
