"""Which scanner reads which file, and the folder walk.

A file's kind comes from its name (``*.sh``, ``*.py``, ``*.md``...), then its shebang; a
file that is not text is judged by its magic bytes. :func:`scan_folder` reads every
regular file below the root without following a symlink (a symlink, a FIFO or a device is
a finding of its own and is never opened).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from habakkuk.engine.errors import HabakkukError
from habakkuk.knowledge.scan.context import Context
from habakkuk.knowledge.scan.markdown import scan_markdown
from habakkuk.knowledge.scan.python_code import scan_python
from habakkuk.knowledge.scan.shell import scan_shell
from habakkuk.knowledge.scan.text_rules import scan_foreign, scan_text
from habakkuk.knowledge.skills.types import Finding, ScanReport, Verdict

__all__ = ["scan_files", "scan_folder"]

_BY_SUFFIX = {
    **dict.fromkeys(
        [".sh", ".bash", ".zsh", ".ksh", ".command", ".bashrc", ".zshrc", ".profile"], "shell"
    ),
    **dict.fromkeys([".py", ".pyw", ".pyi"], "python"),
    **dict.fromkeys([".md", ".markdown", ".mdx", ".txt", ".rst", ".adoc"], "markdown"),
    **dict.fromkeys([".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".mts", ".cts"], "js"),
    **dict.fromkeys([".rb", ".rake"], "ruby"),
    **dict.fromkeys([".ps1", ".psm1", ".psd1"], "powershell"),
    **dict.fromkeys([".pl", ".pm"], "perl"),
    **dict.fromkeys([".applescript", ".scpt"], "applescript"),
    **dict.fromkeys([".bat", ".cmd", ".vbs", ".php", ".lua", ".awk"], "foreign"),
}
_SHEBANG = re.compile(rb"#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-S\s+)?)?([A-Za-z0-9_.-]+)")
_EXECUTABLE_MAGIC = (
    (b"\x7fELF", "an ELF executable"),
    (b"\xfe\xed\xfa\xce", "a Mach-O executable"),
    (b"\xfe\xed\xfa\xcf", "a Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O universal binary or Java class"),
    (b"MZ", "a Windows (PE) executable"),
    (b"\x00asm", "a WebAssembly module"),
    (b"dex\n", "an Android executable"),
)
_ARCHIVE_MAGIC = (
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"Rar!", "a rar archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
)
_MEDIA_MAGIC = (
    b"\x89PNG",
    b"\xff\xd8\xff",
    b"GIF87a",
    b"GIF89a",
    b"%PDF",
    b"\x00\x00\x01\x00",
    b"RIFF",
)


def _kind(path: str, data: bytes) -> str:
    name = path.rsplit("/", 1)[-1]
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    m = _SHEBANG.match(data[:200])
    if m:
        prog = m.group(1).decode("ascii", "replace")
        if re.fullmatch(r"(?:ba|z|da|k|mk|a)?sh", prog):
            return "shell"
        if re.fullmatch(r"(?:python|pypy)[\d.]*", prog):
            return "python"
        if prog in ("node", "deno", "bun"):
            return "js"
        if prog.startswith(("ruby", "perl")):
            return prog.rstrip("0123456789.")
        return "foreign"
    return "markdown"  # README, LICENSE, description files, yaml, json: read as prose


def _dispatch(ctx: Context, lang: str, text: str, line: int, depth: int) -> None:
    if lang == "shell":
        scan_shell(ctx, text, line, depth)
    elif lang == "python":
        scan_python(ctx, text, line, depth, strict=True)
    elif lang == "python-lenient":
        scan_python(ctx, text, line, depth, strict=False)
    elif lang == "markdown":
        scan_markdown(ctx, text, line, depth)
    elif lang == "text":
        scan_text(ctx, text, line, depth)
    else:
        scan_foreign(ctx, text, line, depth)
    if depth > 0 and lang != "markdown":
        scan_text(ctx, text, line, depth)


def _binary(path: str, data: bytes) -> Finding | None:
    for magic, what in _EXECUTABLE_MAGIC:
        if data.startswith(magic) and (magic != b"MZ" or b"\x00" in data[:512]):
            return Finding(
                "dangerous", "executable", path, 0, f"{what} (a skill ships no binaries)"
            )
    if len(data) > 262 and data[257:262] == b"ustar":
        return Finding(
            "dangerous", "archive", path, 0, "a tar archive (its content cannot be scanned)"
        )
    for magic, what in _ARCHIVE_MAGIC:
        if data.startswith(magic):
            return Finding(
                "dangerous", "archive", path, 0, f"{what} (its content cannot be scanned)"
            )
    return None


def _scan_one(path: str, data: bytes) -> list[Finding]:
    found = _binary(path, data)
    if found is not None:
        return [found]
    text: str | None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", "replace")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if text is None or "\x00" in text[:8192]:
        if data.startswith(_MEDIA_MAGIC):
            return [
                Finding("caution", "binary-file", path, 0, "an image or PDF (not read by the scan)")
            ]
        return [Finding("dangerous", "binary-file", path, 0, "a binary file that cannot be read")]
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    ctx = Context(path, _dispatch)
    kind = _kind(path, data)
    _dispatch(ctx, kind, text, 1, 0)
    if kind != "markdown":
        scan_text(ctx, text, 1, 0)
        if kind in ("js", "python", "shell", "ruby", "perl", "powershell") and any(
            len(row) > 5000 for row in text.split("\n")
        ):
            ctx.add("caution", "minified", 0, "minified or packed code (too long a line to review)")
    return ctx.findings


def _report(findings: list[Finding], files: int, size: int) -> ScanReport:
    findings.sort(key=lambda f: (f.file, f.line, f.severity != "dangerous", f.rule))
    verdict: Verdict = "clean"
    if any(f.severity == "dangerous" for f in findings):
        verdict = "dangerous"
    elif findings:
        verdict = "caution"
    return ScanReport(verdict, tuple(findings), files, size)


def scan_files(files: Mapping[str, bytes]) -> ScanReport:
    """Scan files given as relative "/"-separated paths and their bytes."""
    findings: list[Finding] = []
    size = 0
    for path in sorted(files):
        data = files[path]
        size += len(data)
        findings.extend(_scan_one(path, data))
    return _report(findings, len(files), size)


def _walk(root: Path, rel: str, files: dict[str, bytes], findings: list[Finding]) -> None:
    with os.scandir(root / rel if rel else root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                target = os.readlink(entry.path)
                findings.append(
                    Finding(
                        "dangerous",
                        "symlink",
                        path,
                        0,
                        f"a symlink (to {target}) can reach outside the skill",
                    )
                )
            elif entry.is_dir(follow_symlinks=False):
                _walk(root, path, files, findings)
            elif entry.is_file(follow_symlinks=False):
                data = _read_regular(entry.path)
                if data is None:
                    findings.append(
                        Finding(
                            "dangerous", "symlink", path, 0, "changed into a symlink while scanned"
                        )
                    )
                else:
                    files[path] = data
            else:
                findings.append(
                    Finding("dangerous", "special-file", path, 0, "a device, FIFO or socket")
                )


def _read_regular(path: str) -> bytes | None:
    """The bytes of a regular file, opened without following a symlink; None if not one."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def scan_folder(root: Path) -> ScanReport:
    """Scan every regular file below `root` (symlinks reported, never followed)."""
    if root.is_symlink():
        return _report(
            [Finding("dangerous", "symlink", ".", 0, "the skill folder itself is a symlink")], 0, 0
        )
    if not root.is_dir():
        raise HabakkukError(f"cannot scan {root}: not a folder")
    files: dict[str, bytes] = {}
    findings: list[Finding] = []
    _walk(root, "", files, findings)
    report = scan_files(files)
    extra = sorted(findings + list(report.findings), key=lambda f: (f.file, f.line))
    return _report(extra, report.files + sum(1 for f in findings), report.bytes)
