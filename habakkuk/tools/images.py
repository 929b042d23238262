"""Images a tool shows the model: told by their bytes, checked, scaled to what models take.

`prepare` is the one gate: JPEG, PNG, GIF and WebP are recognised by their magic
bytes (never by a file name or a server's Content-Type); the header's pixel count is
checked before anything is decoded, so a decompression bomb (a small file claiming
30,000 x 30,000 pixels) is refused without allocating it; the whole image is then
decoded once, so a truncated or corrupt file is refused too, naming why. An image over
5 MB or 2048 pixels on a side is scaled to 1568 pixels on its long side and re-encoded
as JPEG (what the providers recommend: bigger images cost tokens and are scaled down
by them anyway). Pillow does the decoding and is imported by the first call.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL.Image import Image

# Read at most this much of a file, a download or a tool's image: a 20 MB PNG screenshot
# fits; more is not an image worth a model's look.
MAX_SOURCE_BYTES = 50 * 1024 * 1024
# Over either limit an image is scaled down before a model sees it.
MAX_BYTES = 5 * 1024 * 1024
MAX_SIDE = 2048
SCALED_SIDE = 1568
# Over this many pixels (a 48-megapixel photo fits) the header is taken for a bomb.
MAX_PIXELS = 50_000_000
JPEG_QUALITY = 85
_ORIENTATION = 0x0112  # the EXIF tag

MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_SUFFIXES = {"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp"}
_NAMES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WebP"}


class ImageError(Exception):
    """The bytes are not an image a model can be shown; the message says why, in a line."""


@dataclass(frozen=True)
class PreparedImage:
    """An image ready for a model: its bytes and what was done to them."""

    data: bytes
    media_type: str
    width: int
    height: int
    # The image as it came: its type, size in bytes and pixels.
    source_type: str
    source_bytes: int
    source_width: int
    source_height: int

    @property
    def scaled(self) -> bool:
        return (self.width, self.height) != (self.source_width, self.source_height) or (
            self.media_type != self.source_type
        )

    @property
    def suffix(self) -> str:
        """The file suffix of its type (".png"), for the blob it is stored in."""
        return _SUFFIXES[self.media_type]

    def describe(self) -> str:
        """One line: what the image is and, when it was scaled, to what."""
        line = (
            f"{_NAMES[self.source_type]} image, {self.source_width:,} x {self.source_height:,} "
            f"px, {_size(self.source_bytes)}"
        )
        if self.scaled:
            line += (
                f"; scaled to {self.width:,} x {self.height:,} px JPEG ({_size(len(self.data))})"
            )
        return line


def sniff(data: bytes) -> str | None:
    """The image type the bytes are, by their magic number: one of MEDIA_TYPES or None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def prepare(data: bytes, label: str) -> PreparedImage:
    """Check `data` and make it fit for a model (see the module's docstring); `label`
    names it in errors. Raises ImageError. Blocking: run it off the event loop."""
    kind = sniff(data)
    if kind is None:
        what = "is empty" if not data else "is not a JPEG, PNG, GIF or WebP image (by its bytes)"
        raise ImageError(f"{label} {what}")
    from PIL import Image

    image = _open(data, kind, label)
    with image:
        width, height = image.size
        if width * height > MAX_PIXELS:
            raise ImageError(
                f"{label}: its header claims {width:,} x {height:,} pixels, over the "
                f"{MAX_PIXELS:,}-pixel limit; refused as a possible decompression bomb"
            )
        if width < 1 or height < 1:
            raise ImageError(f"{label}: the image has no pixels ({width} x {height})")
        scale = len(data) > MAX_BYTES or max(width, height) > MAX_SIDE
        target = _fit(width, height, SCALED_SIDE)
        if scale and kind == "image/jpeg":
            image.draft("RGB", target)  # decode at a fraction of the size: less time and memory
        try:
            image.load()
        except Image.DecompressionBombError as exc:
            raise ImageError(f"{label}: refused as a possible decompression bomb ({exc})") from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise ImageError(
                f"{label}: the {_NAMES[kind]} data is truncated or corrupt ({_reason(exc)})"
            ) from None
        if not scale:
            return PreparedImage(data, kind, width, height, kind, len(data), width, height)
        jpeg, size = _to_jpeg(image, label)
    return PreparedImage(jpeg, "image/jpeg", *size, kind, len(data), width, height)


def _open(data: bytes, kind: str, label: str) -> Image:
    """The image's header read (nothing decoded yet), by the one decoder its bytes name."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            # Pillow warns of a bomb between its two limits and raises above them: both
            # are a refusal here, never a warning in a log.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data), formats=[_NAMES[kind].upper()])
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageError(f"{label}: refused as a possible decompression bomb ({exc})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise ImageError(
            f"{label}: looks like {_NAMES[kind]} but cannot be read ({_reason(exc)})"
        ) from None


def _to_jpeg(image: Image, label: str) -> tuple[bytes, tuple[int, int]]:
    """The image (loaded) at most SCALED_SIDE on its long side, as JPEG bytes, and its size."""
    from PIL import Image as PILImage
    from PIL import ImageOps

    try:
        if image.getexif().get(_ORIENTATION, 1) != 1:  # a phone photo taken sideways
            image = ImageOps.exif_transpose(image)
        rgb = _flattened(image)
    except (OSError, ValueError) as exc:
        raise ImageError(f"{label}: cannot convert its {image.mode} pixels ({exc})") from None
    # Bicubic is antialiased in Pillow when it shrinks, and twice as fast as Lanczos at
    # these ratios (media_bench.py); reducing_gap: a fast integer reduction first when the
    # image is over twice the target, then the filter on what is left.
    rgb.thumbnail(_fit(*rgb.size, SCALED_SIDE), PILImage.Resampling.BICUBIC, reducing_gap=2.0)
    out = io.BytesIO()
    rgb.save(out, "JPEG", quality=JPEG_QUALITY)
    return out.getvalue(), rgb.size


def _flattened(image: Image) -> Image:
    """RGB pixels; transparency goes onto white (JPEG has no alpha)."""
    from PIL import Image as PILImage

    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = PILImage.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    if image.mode.startswith("I;16") or image.mode == "I":
        # 16-bit greyscale: keep the top 8 bits.
        return image.point(lambda v: v / 256).convert("L").convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")


def _fit(width: int, height: int, side: int) -> tuple[int, int]:
    """(width, height) scaled so the long side is at most `side`, neither below 1."""
    longest = max(width, height)
    if longest <= side:
        return width, height
    return max(1, round(width * side / longest)), max(1, round(height * side / longest))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else f"{text[:200]}…"


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MB"
    if count >= 1024:
        return f"{count / 1024:.0f} KB"
    return f"{count} bytes"
