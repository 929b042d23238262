"""The three sizes of a desk, and the mapping between them (spec 000 "Computer").

A screenshot is captured at the screen's pixels, scaled with a box filter so neither
side exceeds 1366 pixels, and shown to the model; the pointer moves in the input space
(the pixels, except on a Retina Mac, where input is in points). Every coordinate the
model gives is in the latest image it saw and is mapped to input space here; one
outside that image is an error the model reads.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

MAX_SHOWN_SIDE = 1366


class OutsideImage(ValueError):
    """A coordinate the model gave lies outside the image it was shown."""


@dataclass(frozen=True)
class Size:
    """A width and a height in pixels (or points)."""

    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"


def shown_size(captured: Size, limit: int = MAX_SHOWN_SIDE) -> Size:
    """The size the model sees: `captured` scaled (aspect kept, never up) so that neither
    side exceeds `limit`; each side at least one pixel."""
    longest = max(captured.width, captured.height)
    if longest <= limit:
        return captured
    factor = limit / longest
    return Size(
        max(1, min(limit, round(captured.width * factor))),
        max(1, min(limit, round(captured.height * factor))),
    )


@dataclass(frozen=True)
class Geometry:
    """The desk's sizes: the image the model saw, the pixels captured, the input space."""

    shown: Size
    captured: Size
    input: Size

    def to_input(self, x: int, y: int) -> tuple[int, int]:
        """Map a point of the shown image to input space (the middle of the area the
        shown pixel covers, so a click lands inside what the model pointed at)."""
        if not (0 <= x < self.shown.width and 0 <= y < self.shown.height):
            raise OutsideImage(
                f"({x}, {y}) is outside the screenshot, which is {self.shown} "
                f"(x 0-{self.shown.width - 1}, y 0-{self.shown.height - 1})"
            )
        return (
            _scale(x, self.shown.width, self.input.width),
            _scale(y, self.shown.height, self.input.height),
        )

    def to_shown(self, x: int, y: int) -> tuple[int, int]:
        """Map an input-space point (the pointer's position) into the shown image: the
        shown pixel that covers the input pixel's middle."""
        return (
            _covering(x, self.input.width, self.shown.width),
            _covering(y, self.input.height, self.shown.height),
        )

    def crop_box(self, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """A region of the shown image (x0, y0, x1, y1; ends exclusive) in captured pixels."""
        x0, y0, x1, y1 = box
        if not (0 <= x0 < x1 <= self.shown.width and 0 <= y0 < y1 <= self.shown.height):
            raise OutsideImage(
                f"region ({x0}, {y0})-({x1}, {y1}) is not inside the screenshot, which is "
                f"{self.shown}"
            )
        sx, sy = self.captured.width / self.shown.width, self.captured.height / self.shown.height
        return (int(x0 * sx), int(y0 * sy), max(int(x0 * sx) + 1, round(x1 * sx)),
                max(int(y0 * sy) + 1, round(y1 * sy)))  # fmt: skip


def _scale(value: int, shown: int, target: int) -> int:
    """`value` of a `shown`-wide axis as a coordinate of a `target`-wide one."""
    if shown == target:
        return value
    return min(target - 1, int((value + 0.5) * target / shown))


def _covering(value: int, source: int, shown: int) -> int:
    """The pixel of a `shown`-wide axis covering the middle of pixel `value` of a
    `source`-wide one (clamped to the axis)."""
    return min(shown - 1, max(0, int((value + 0.5) * shown / max(1, source))))


@dataclass(frozen=True)
class Shot:
    """One screenshot ready for the model: PNG bytes at the shown size, and the geometry."""

    png: bytes
    geometry: Geometry


def scaled_shot(png: bytes, input_size: Size | None = None, limit: int = MAX_SHOWN_SIDE) -> Shot:
    """Decode a capture, scale it with a box filter to fit `limit`, encode it as PNG.

    `input_size` is the pointer's space when it differs from the pixels (a Retina Mac's
    points); None: the same as the pixels. Raises ValueError for bytes that are no image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(png)) as opened:
            opened.load()
            image = opened.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"the screen capture is not a readable image ({exc})") from None
    captured = Size(image.width, image.height)
    shown = shown_size(captured, limit)
    if shown != captured:
        image = image.resize((shown.width, shown.height), Image.Resampling.BOX)
    out = io.BytesIO()
    # Fast compression: a screenshot is encoded for every action, and the blob is
    # short-lived; the level-6 default takes several times as long for ~20 % less.
    image.save(out, "PNG", compress_level=1)
    return Shot(out.getvalue(), Geometry(shown, captured, input_size or captured))


def cropped(png: bytes, box: tuple[int, int, int, int], limit: int = MAX_SHOWN_SIDE) -> bytes:
    """The region `box` (captured pixels) of a full-resolution capture, as PNG, scaled to
    fit `limit` only when it is larger (zoom: a closer look at part of the screen)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as opened:
        region = opened.convert("RGB").crop(box)
    fit = shown_size(Size(region.width, region.height), limit)
    if (fit.width, fit.height) != region.size:
        region = region.resize((fit.width, fit.height), Image.Resampling.BOX)
    out = io.BytesIO()
    region.save(out, "PNG")
    return out.getvalue()
