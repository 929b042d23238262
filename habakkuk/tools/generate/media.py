"""Files in and out: the type of a file from its bytes, an input image read from the
workspace, and each result saved under workspace/images/ or workspace/videos/ with a
name no other file has (created with O_EXCL, through folders opened without following
links, so a result never lands outside the workspace or over another file)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from habakkuk.engine.toolkit.registry import ToolError
from habakkuk.tools.safe_open import open_beneath

MAX_INPUT_BYTES = 20 * 1024 * 1024
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/webp": ".webp",
    "image/gif": ".gif",
    "video/mp4": ".mp4",
    "video/webm": ".webm",
    "video/quicktime": ".mov",
}
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def sniff(data: bytes) -> str | None:
    """The media type the bytes show (PNG, JPEG, WebP, GIF, MP4/MOV, WebM), else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[4:8] == b"ftyp":
        return "video/quicktime" if data[8:10] == b"qt" else "video/mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm"
    return None


def extension(media_type: str) -> str:
    return _EXTENSIONS.get(media_type, ".bin")


def read_input_image(path: Path, label: str) -> tuple[bytes, str]:
    """An input image's bytes and type (sniffed: PNG, JPEG, WebP); ToolError saying why not."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise ToolError(f"{label}: {path} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{label}: {path} is a folder, not an image") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ToolError(f"{label}: {path} is over {MAX_INPUT_BYTES // 1024 // 1024} MB")
    kind = sniff(data)
    if kind not in ("image/png", "image/jpeg", "image/webp"):
        raise ToolError(f"{label}: {path} is not a PNG, JPEG or WebP image")
    return data, kind


def slug(prompt: str, words: int = 5) -> str:
    """A few words of the prompt for a file name: lowercase letters and digits, dashes."""
    found = re.findall(r"[a-z0-9]+", prompt.lower())[:words]
    return "-".join(found)[:48].strip("-") or "untitled"


def save_output(workspace: Path, folder: str, stem: str, data: bytes, media_type: str) -> Path:
    """Write `data` as a new file workspace/folder/<stem>[-k]<ext>; its path."""
    root = Path(os.path.realpath(workspace))
    root.mkdir(parents=True, exist_ok=True)
    ext = extension(media_type)
    dir_fd = open_beneath(root, (folder,), create=True, label=f"{folder}/")
    try:
        for attempt in range(1000):
            name = f"{stem}{f'-{attempt + 1}' if attempt else ''}{ext}"
            try:
                fd = os.open(name, _FILE_FLAGS, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                continue
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            except BaseException:
                os.unlink(name, dir_fd=dir_fd)
                raise
            return root / folder / name
        raise ToolError(f"cannot find a free name for {stem}{ext} in {folder}/")
    finally:
        os.close(dir_fd)


def stem_for(prompt: str, index: int = 0) -> str:
    """A file stem: the time, a few words of the prompt, and the image's number."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slug(prompt)}" + (f"-{index + 1}" if index else "")
