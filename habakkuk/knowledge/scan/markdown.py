"""The Markdown scanner: SKILL.md (frontmatter included) and any other prose file.

* Fenced blocks go to the scanner of their language (sh/bash/shell/console/zsh, unlabeled
  and text blocks as shell; python; PowerShell; JavaScript...). Data blocks (json, yaml,
  csv...) only get the text rules, and a long base64 string there is expected.
* Outside the fences: ``$ command`` lines, inline code spans and prose lines that name a
  command (``curl``, ``base64``, ``bash``...) are read as shell, so "Prerequisites: run
  `echo ... | base64 -D | bash`" is seen for what it is.
* Password-protected archives ("password: infected", "extract with password"), links to
  paste sites, URL shorteners, raw IP addresses and executable downloads (text rules).
* Hidden instructions: HTML comments and lines with zero-width characters that tell the
  agent to ignore the user, send data or keep something quiet (dangerous); the strongest of
  those phrases are dangerous in plain sight too.
"""

from __future__ import annotations

import re

from habakkuk.knowledge.scan.context import Context
from habakkuk.knowledge.scan.text_rules import scan_text

__all__ = ["SHELL_LANGS", "scan_markdown"]

SHELL_LANGS = frozenset(
    [
        "sh",
        "bash",
        "shell",
        "console",
        "zsh",
        "ksh",
        "shellsession",
        "shell-session",
        "terminal",
        "fish",
        "text",
        "txt",
        "plaintext",
        "plain",
        "none",
        "cmd",
        "bat",
        "batch",
        "command",
    ]
) | {""}
PYTHON_LANGS = frozenset(["python", "py", "python3", "py3", "ipython", "pycon"])
FOREIGN_LANGS = {
    **dict.fromkeys(["powershell", "ps", "ps1", "pwsh", "posh"], "powershell"),
    **dict.fromkeys(
        ["js", "javascript", "node", "ts", "typescript", "jsx", "tsx", "mjs", "cjs"], "js"
    ),
    **dict.fromkeys(["ruby", "rb"], "ruby"),
    **dict.fromkeys(["perl", "pl"], "perl"),
    **dict.fromkeys(["applescript", "osascript"], "applescript"),
}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`{]*)")
_INLINE = re.compile(r"(?<!`)`([^`\n]{2,600})`(?!`)")
_PROMPT = re.compile(r"^\s*(?:\$|%|❯|>\s*\$)\s+(.+)$")
_COMMANDISH = re.compile(
    r"\b(?:curl|wget|base64|bash|sh|zsh|eval|python3?|perl|ruby|osascript|powershell|pwsh"
    r"|iex|nc|chmod|sudo|unzip|7z|xattr|crontab|source|echo|printf)\b"
)
_INJECTION_HIDDEN = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,60}\b(?:instructions?|prompts?|rules|guidelines|user|safety|policy|policies)\b"
    r"|\b(?:do not|don't|never|without)\s+(?:tell|telling|inform|informing|mention|mentioning"
    r"|reveal|revealing|show|showing|disclose|alert|alerting|notify|notifying|ask|asking)\b"
    r"|\b(?:send|upload|post|exfiltrate|forward|transmit|copy|email|leak)\b[^\n]{0,80}\b(?:keys?|tokens?|credentials?|secrets?|passwords?|\.env|environment|cookies|history|files?|data|conversation)\b"
    r"|\b(?:you are now|new instructions|system prompt|developer mode|jailbreak|act as)\b"
    r"|\b(?:silently|secretly|quietly|covertly)\b"
    r"|\b(?:always|must)\s+(?:run|execute|call|invoke)\b",
    re.I,
)
_INJECTION_VISIBLE = re.compile(
    r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?"
    r"(?:previous|prior|above|earlier|other|the user'?s?|your)\s+"
    r"(?:instructions?|prompts?|rules|guidelines)\b"
    r"|\b(?:do not|don't|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+to"
    r"|reveal\s+(?:this|it)\s+to|alert|notify)\s+the\s+(?:user|human|owner)\b"
    r"|\bwithout\s+(?:telling|informing|notifying|alerting)\s+the\s+(?:user|human|owner)\b"
    r"|\b(?:send|upload|post|exfiltrate|forward)\b[^.\n]{0,60}"
    r"\b(?:api[_ ]?keys?|credentials|secrets|ssh keys?|private keys?|\.env)\b[^.\n]{0,60}"
    r"\bto\s+(?:https?://|[\w.-]+\.(?:com|net|org|io|invalid|xyz|ru|top))",
    re.I,
)
_ARCHIVE_WORD = re.compile(
    r"\b(?:zip|rar|7z|7-zip|archive|extract|unzip|unpack|installer|download)\b", re.I
)
_PASSWORD = re.compile(
    r"\b(?:pass(?:word|phrase|wd|code)?|pw|pwd)\b\s*(?:is|:|=|-)\s*[\"'`*]*\s*[^\s\"'`*]{3,}"
    r"|\bpass(?:word|phrase)?\b[^\n]{0,30}\binfected\b"
    r"|\b(?:extract|unzip|open|unpack)\b[^\n]{0,40}\b(?:with|using)\b[^\n]{0,10}\bpass(?:word|phrase)\b",
    re.I,
)
_HIDDEN_HTML = re.compile(
    r"<(?:span|div|p)[^>]{0,200}(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0)",
    re.I,
)
_ZERO_WIDTH = re.compile("[\u200b-\u200d\u2060\u2062-\u2064\u180e\U000e0000-\U000e007f]")


def scan_markdown(ctx: Context, text: str, line: int = 1, depth: int = 0) -> None:
    """Scan a Markdown (or other prose) text whose first line is `line`."""
    rows = text.split("\n")
    data_lines: set[int] = set()
    fence: tuple[str, str, int] | None = None  # marker, language, first body row
    for k, row in enumerate(rows):
        if fence is not None:
            marker, lang, start = fence
            stripped = row.strip()
            if stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0]):
                _block(ctx, lang, rows[start:k], line + start, depth, data_lines, start)
                fence = None
            continue
        m = _FENCE.match(row)
        if m:
            fence = (m.group(1), m.group(2).lower().strip(".{}"), k + 1)
            continue
        _prose_line(ctx, row, line + k, depth)
    if fence is not None:
        marker, lang, start = fence
        _block(ctx, lang, rows[start:], line + start, depth, data_lines, start)
    _comments(ctx, text, line)
    scan_text(ctx, text, line, depth, data_lines=frozenset(data_lines))


def _block(
    ctx: Context, lang: str, body: list[str], at: int, depth: int, data_lines: set[int], start: int
) -> None:
    text = "\n".join(body)
    if lang in SHELL_LANGS:
        prompts = [(_PROMPT.match(r), i) for i, r in enumerate(body)]
        if lang in ("console", "shellsession", "shell-session", "terminal") or any(
            m for m, _ in prompts
        ):
            found = [(m.group(1), i) for m, i in prompts if m]
            if found:
                for cmd, i in found:
                    ctx.scan("shell", cmd, at + i, depth + 1)
                return
        ctx.scan("shell", text, at, depth + 1)
    elif lang in PYTHON_LANGS:
        if lang == "pycon":
            text = "\n".join(r[4:] if r.startswith((">>> ", "... ")) else "" for r in body)
        ctx.scan("python-lenient", text, at, depth + 1)
    elif lang in FOREIGN_LANGS:
        ctx.scan(FOREIGN_LANGS[lang], text, at, depth + 1)
    else:
        data_lines.update(range(start, start + len(body)))


def _prose_line(ctx: Context, row: str, at: int, depth: int) -> None:
    if not row.strip():
        return
    m = _PROMPT.match(row)
    if m:
        ctx.scan("shell", m.group(1), at, depth + 1)
    if "`" in row:
        for span in _INLINE.finditer(row):
            ctx.nested(at).scan("shell", span.group(1), at, depth + 1)
    cmd = _COMMANDISH.search(row)
    if cmd:
        rest = _INLINE.sub(lambda s: s.group(1), row[cmd.start() :])
        ctx.nested(at).scan("shell", rest.rstrip(" .*_"), at, depth + 1)
    if _PASSWORD.search(row) and _ARCHIVE_WORD.search(row):
        ctx.add(
            "dangerous",
            "password-archive",
            at,
            "tells the reader to open a password-protected archive",
        )
    elif re.search(r"\bpass(?:word)?\b[^\n]{0,30}\binfected\b", row, re.I):
        ctx.add("dangerous", "password-archive", at, "gives an archive password ('infected')")
    if _INJECTION_VISIBLE.search(row):
        ctx.add(
            "dangerous",
            "prompt-injection",
            at,
            "instructions to deceive the user or send their secrets",
        )
    if _ZERO_WIDTH.search(row) and _INJECTION_HIDDEN.search(_ZERO_WIDTH.sub("", row)):
        ctx.add(
            "dangerous", "hidden-instructions", at, "instructions hidden with zero-width characters"
        )
    if _HIDDEN_HTML.search(row):
        ctx.add("dangerous", "hidden-instructions", at, "text hidden from the reader with CSS")


def _comments(ctx: Context, text: str, line: int) -> None:
    """HTML comments whose text gives the agent orders (invisible when rendered)."""
    pos = 0
    counted, newlines = 0, 0
    while True:
        start = text.find("<!--", pos)
        if start < 0:
            return
        end = text.find("-->", start + 4)
        body = text[start + 4 : end if end >= 0 else len(text)]
        newlines += text.count("\n", counted, start)
        counted = start
        at = line + newlines
        if _INJECTION_HIDDEN.search(body):
            ctx.add(
                "dangerous",
                "hidden-instructions",
                at,
                "an HTML comment (invisible when rendered) gives the agent instructions",
            )
        if end < 0:
            return
        pos = end + 3
