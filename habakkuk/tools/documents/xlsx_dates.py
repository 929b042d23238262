"""Which cells of a workbook are dates or times: Excel stores them as numbers (days since
its epoch) and says how to show them only through the cell's style's number format.

The styles part lists the number formats (built-in ones by id, custom ones by their
format code) and, in cellXfs, each cell style's format; a cell's `s` is an index into
cellXfs. A format is a date if its code has day, month or year tokens, a time if it has
only hours, minutes or seconds; an elapsed-time format ([h]:mm) stays a number, since a
duration of 30 hours is not a time of day.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from .ooxml import Package, local, stream

Kind = str  # "date", "time", "datetime" or "" (a number)

# The built-in number formats that show a date or a time (ECMA-376 18.8.30, and the
# East Asian date formats Excel also builds in).
_BUILT_IN: dict[int, Kind] = {
    **dict.fromkeys((14, 15, 16, 17, *range(27, 37), *range(50, 59)), "date"),
    **dict.fromkeys((18, 19, 20, 21, 45, 47), "time"),
    22: "datetime",
}
# What does not count in a format code: quoted text, escaped characters, fill and
# padding characters, and bracketed colours and locales.
_LITERALS = re.compile(r'"[^"]*"|\\.|[_*].|\[[^\]]*\]')
_ELAPSED = re.compile(r"\[(h+|m+|s+)\]", re.IGNORECASE)
_LAST_DAY = 2_958_465  # 9999-12-31, the last date Excel shows


class DateStyles:
    """The kind of each cell style (by its index in cellXfs) and the workbook's epoch."""

    def __init__(self, kinds: list[Kind], epoch_1904: bool) -> None:
        self.kinds = kinds
        self.epoch_1904 = epoch_1904

    def __bool__(self) -> bool:
        return any(self.kinds)

    def text(self, style: str | None, raw: str) -> str | None:
        """The date or time a number of style `style` shows, or None to keep the number."""
        if not style or not style.isdigit() or int(style) >= len(self.kinds):
            return None
        kind = self.kinds[int(style)]
        if not kind:
            return None
        try:
            days = float(raw)
        except ValueError:
            return None
        if not math.isfinite(days) or not 0 <= days <= _LAST_DAY:
            return None
        if self.epoch_1904:
            base = datetime(1904, 1, 1)
        else:  # Excel counts a 29 February 1900 that never was: serials before it are a day off
            base = datetime(1899, 12, 30) if days >= 61 else datetime(1899, 12, 31)
        moment = base + timedelta(seconds=round(days * 86_400))
        if kind == "date":
            return moment.strftime("%Y-%m-%d")
        if kind == "time":
            return moment.strftime("%H:%M:%S")
        return moment.strftime("%Y-%m-%d %H:%M:%S")


def date_styles(package: Package, workbook: str, epoch_1904: bool) -> DateStyles:
    """The workbook's date styles, from its styles part (none without one)."""
    custom: dict[int, str] = {}
    formats: list[int] = []
    in_cell_styles = False
    for part in package.related(workbook, "styles"):
        for started, elem in stream(package, part):
            name = local(elem.tag)
            if name == "cellXfs":
                in_cell_styles = started
            elif started:
                continue
            elif name == "numFmt":
                number = elem.get("numFmtId") or ""
                if number.isdigit():
                    custom[int(number)] = elem.get("formatCode") or ""
            elif name == "xf" and in_cell_styles:
                number = elem.get("numFmtId") or "0"
                formats.append(int(number) if number.isdigit() else 0)
    kinds = [
        _custom_kind(custom[number]) if number in custom else _BUILT_IN.get(number, "")
        for number in formats
    ]
    return DateStyles(kinds, epoch_1904)


def _custom_kind(code: str) -> Kind:
    """Whether a custom format code shows a date, a time, both, or a number."""
    if _ELAPSED.search(code):
        return ""
    section = _LITERALS.sub("", code.split(";", 1)[0]).lower()
    date = any(token in section for token in ("d", "y")) or (
        "m" in section and not any(token in section for token in ("h", "s"))
    )
    time = any(token in section for token in ("h", "s"))
    if date and time:
        return "datetime"
    return "date" if date else "time" if time else ""
