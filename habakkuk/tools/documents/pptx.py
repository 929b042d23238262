"""PPTX: each slide's text under "--- slide N ---", a paragraph a line, then its notes.

Slides come in the presentation's order (its slide list, not the part names). Of a
notes page only the notes themselves are read (the body placeholder), not the slide
number or the picture of the slide it also holds.
"""

from __future__ import annotations

import contextlib

from .ooxml import Package, local, parse, stream
from .output import Full, Sink
from .ranges import Ranges


def read_pptx(package: Package, main: str, sink: Sink, pages: Ranges | None) -> str:
    """Add the selected slides and their notes to `sink` until it is full; returns the
    summary ("PPTX, 12 slides")."""
    slides = _slides(package, main)
    count = len(slides)
    chosen = pages.pick(count, "slides", package.name) if pages is not None else None
    with contextlib.suppress(Full):  # the sink is full: the note says where it was cut
        for number in chosen if chosen is not None else range(1, count + 1):
            part = slides[number - 1]
            sink.where = f"slide {number}"
            lines, hidden = _paragraphs(package, part, notes=False)
            sink.add(f"--- slide {number}{' (hidden)' if hidden else ''} ---\n")
            for line in lines:
                sink.add(line + "\n")
            for notes in package.related(part, "notesSlide"):
                lines, _ = _paragraphs(package, notes, notes=True)
                if lines:
                    sink.add("[notes]\n" + "".join(line + "\n" for line in lines))
    return f"PPTX, {count} slide{'s' if count != 1 else ''}"


def _slides(package: Package, main: str) -> list[str]:
    """The part of each slide, in the presentation's order."""
    targets = {rel.id: rel.target for rel in package.relationships(main) if rel.type == "slide"}
    order: list[str] = []
    for elem in parse(package, main):
        if local(elem.tag) == "sldId":
            rel_id = next((v for k, v in elem.attrib.items() if local(k) == "id" and k != "id"), "")
            if rel_id in targets and package.has(targets[rel_id]):
                order.append(targets[rel_id])
    return order


def _paragraphs(package: Package, part: str, *, notes: bool) -> tuple[list[str], bool]:
    """The non-empty paragraphs of a slide's shapes (of a notes page: its notes only),
    and whether the slide is hidden in the show (show="0" on its root)."""
    lines: list[str] = []
    words: list[str] = []
    placeholder = ""  # the type of the current shape's placeholder, if it is one
    hidden: bool | None = None
    for started, elem in stream(package, part):
        name = local(elem.tag)
        if started:
            if hidden is None:
                hidden = elem.get("show") in ("0", "false")
            elif name == "sp":
                placeholder = ""
            elif name == "p":
                words = []
            continue
        if name == "ph":
            placeholder = elem.get("type") or "body"  # a placeholder without a type is a body
        elif name == "t":
            words.append(elem.text or "")
        elif name == "br":
            words.append("\n")
        elif name == "p":
            line = "".join(words).strip()
            if line and (not notes or placeholder == "body"):
                lines.append(line)
    return lines, bool(hidden)
