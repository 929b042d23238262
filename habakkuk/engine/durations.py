"""Durations in config files: a number of seconds, or text such as 500ms, 60s, 2m, 1h."""

from __future__ import annotations


def parse_duration(value: float | str) -> float:
    """Seconds from a number or text such as 500ms, 60s, 2m, 1h; ValueError otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        units = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0))
        for suffix, factor in units:
            if text.endswith(suffix) and text[: -len(suffix)].strip():
                try:
                    seconds = float(text[: -len(suffix)]) * factor
                except ValueError:
                    continue
                break
        else:
            try:
                seconds = float(text)
            except ValueError:
                raise ValueError(f"{value!r} is not a duration (e.g. 30s, 2m)") from None
    if not seconds > 0:
        raise ValueError(f"{value!r} must be more than zero")
    return seconds
