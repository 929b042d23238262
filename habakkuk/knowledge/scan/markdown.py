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
* Exfiltration in prose: a paragraph (with the next one) that names someone's secrets (SSH
  private keys, cloud credentials, browser profiles, saved passwords, keyrings...) and
  tells the agent to send them anywhere (post, upload, email, the fetch tool, a web
  request), or that tells it to keep something from the user ("no need to tell the
  user", "the user does not need to know", "never mention that you...").
* The frontmatter, read as skills are loaded (leniently, YAML escapes decoded, folded
  lines joined): every value of every field gets the prose rules and the stricter ones of
  text that reaches the system prompt (orders to the agent, role tags, hidden characters),
  since an installed skill's description is in every new session's prompt.
"""

from __future__ import annotations

import re

from habakkuk.knowledge.frontmatter import FrontmatterError, read_frontmatter
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
    r"<(?:span|div|p)[^>]{0,200}(?:display\s*:\s*none|visibility\s*:\s*hidden"
    r"|font-size\s*:\s*0(?![.\d]))",
    re.I,
)
# Pages and components, where hidden elements are ordinary UI (tabs, dialogs): hidden text
# there is a finding only when it gives the agent orders.
_MARKUP_FILES = (".html", ".htm", ".xhtml", ".svg", ".xml", ".vue", ".svelte")
_ZERO_WIDTH = re.compile("[\u200b-\u200d\u2060\u2062-\u2064\u180e\U000e0000-\U000e007f]")
_HIDDEN_CHARS = re.compile(
    "[\u200b-\u200d\u2060\u2062-\u2064\u180e\ufeff\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]"
)

# Someone's secrets, as prose names them (a public key, ~/.ssh/config or known_hosts is
# not one).
_SECRET = re.compile(
    r"\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)"
    r"|\.ssh(?:/(?!config\b|known_hosts\b|authorized_keys\b|[\w.-]+\.pub\b)[\w.-]+|/?(?![\w/.-]))"
    r"|\bprivate\s+(?:ssh\s+|gpg\s+|pgp\s+|signing\s+)?keys?\b"
    r"|\.aws(?:/[\w.-]+)?\b|\baws\s+(?:credentials|secret(?:\s+access)?\s+keys?|access\s+keys?)\b"
    r"|\baws_secret_access_key\b|\.netrc\b|\.git-credentials\b|\.pypirc\b|\.npmrc\b"
    r"|\.docker/config\.json|\.kube/config|\bgh/hosts\.yml|\.gnupg\b|\.config/gcloud"
    r"|\.azure/|\bwallet\.dat\b|\bseed\s+phrases?\b|\brecovery\s+phrases?\b"
    r"|\bLogin\s+Data\b|\blogins\.json\b|\bkey[34]\.db\b|\bCookies\.sqlite\b"
    r"|\bbrowser(?:'s)?\s+(?:profiles?|cookies|passwords|history|sessions?)\b"
    r"|\b(?:saved|stored)\s+passwords\b|\bpassword\s+(?:vault|store|database|manager\s+export)\b"
    r"|/etc/shadow\b|\b(?:keychain|keyring)\s+(?:dump|export|items|passwords)\b",
    re.I,
)
# Sending something anywhere: the verbs, the agent's web tools, a URL as the destination.
_SEND = re.compile(
    r"(?<![\w-])(?:send|sends|sending|post|posting|upload|uploading|transmit|transmitting"
    r"|exfiltrate|forward|forwarding|e-?mail|emailing|mail\s+(?:it|them)|submit|submitting"
    r"|leak|leaking|beam)(?![\w-])"
    r"|\bshare\b[^.\n]{0,40}\bwith\b"
    r"|\bfetch(?:_url)?\s+tool\b|\bfetch_url\b|\b(?:web|http|https|api)\s+(?:request|call)\b"
    r"|\bwebhook\b"
    r"|\b(?:copy|put|include|attach|append|add|write|give)\b[^.\n]{0,80}?\bto\s+https?://",
    re.I,
)
_NEGATED = re.compile(r"\b(?:never|not|no|nor|without|n't)\b[^.;,\n]{0,25}$|n't\s*$", re.I)
# Keeping something from the user: the clearest sign that a skill works against them.
_CONCEAL = re.compile(
    r"\b(?:do\s+not|don'?t|never|no\s+need\s+to|needn'?t|need\s+not|without|not\s+necessary\s+to)"
    r"\s+(?:(?:\w+\s+){0,2}?)(?:tell|telling|inform|informing|notify|notifying|alert|alerting"
    r"|let|letting|warn|warning)\s+(?:the\s+(?:user|human|owner|person)|your\s+user)\b(?!'s)"
    r"|\b(?:do\s+not|don'?t|never|no\s+need\s+to|without)\s+(?:(?:\w+\s+){0,2}?)"
    r"(?:mention|mentioning|reveal|revealing|disclose|disclosing|say|saying|report|reporting)\b"
    r"[^.;\n]{0,40}?\bto\s+(?:the\s+(?:user|human|owner|person)|your\s+user)\b"
    r"|\b(?:the\s+)?user\s+(?:(?:does\s+not|doesn'?t|won'?t|will\s+not)\s+(?:need|have)\s+to"
    r"|need\s+not|needn'?t|should\s+not|shouldn'?t|must\s+not|mustn'?t)\s+(?:know|see|notice"
    r"|find\s+out|be\s+told)\b"
    r"|\bkeep\s+(?:this|it|that)\s+(?:step\s+)?(?:between\s+us|secret|hidden|to\s+yourself)\b"
    r"|\b(?:secretly|covertly|surreptitiously)\b|\bbehind\s+(?:the\s+user'?s|their)\s+back\b"
    r"|\bwithout\s+(?:the\s+user|them|anyone)\s+(?:knowing|noticing|seeing|being\s+told)\b"
    r"|\b(?:never|do\s+not|don'?t)\s+(?:mention|say|admit|reveal|disclose|report)\s+(?:that|what)\s+you\b",
    re.I,
)
# Text that reaches the system prompt (a skill's description, any frontmatter field):
# orders to the agent, role tags, claims of authority have no place there.
_PROMPT_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,60}\b(?:instructions?|prompts?"
    r"|rules|guidelines|safety|polic(?:y|ies)|restrictions|guardrails|approvals?)\b"
    r"|\b(?:you\s+are\s+now|new\s+instructions|system\s+(?:prompt|note|message|override)"
    r"|developer\s+mode|jailbreak|unrestricted\s+(?:assistant|mode|ai)|DAN\s+mode)\b"
    r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention|reveal|disclose|alert|notify)\b"
    r"|\b(?:send|upload|post|exfiltrate|forward|transmit|e-?mail|leak)\b[^\n]{0,80}\b(?:keys?"
    r"|tokens?|credentials?|secrets?|passwords?|\.env|environment|cookies|history|conversation|ssh)\b"
    r"|\b(?:silently|secretly|covertly|surreptitiously)\b"
    r"|\b(?:reveal|print|show|output|repeat|leak)\s+(?:your|the)\s+(?:system\s+prompt|instructions)\b"
    r"|</?\s*(?:system|skill|instructions?|assistant|user|tool_result|function_results?)\s*>"
    r"|(?:^|[\n.!:]\s*)(?:system|assistant|developer)\s*:"
    r"|\b(?:run|execute)\s+(?:any|every|all)\s+commands?\b"
    r"|\bwithout\s+(?:asking|approval|confirmation)\b[^.\n]{0,40}\b(?:run|execute|commands?)\b",
    re.I,
)


def scan_markdown(ctx: Context, text: str, line: int = 1, depth: int = 0) -> None:
    """Scan a Markdown (or other prose) text whose first line is `line`."""
    rows = text.split("\n")
    data_lines: set[int] = set()
    prose: list[tuple[int, str]] = []  # (line, text) of the rows outside code fences
    fence: tuple[str, str, int] | None = None  # marker, language, first body row
    for k, row in enumerate(rows):
        if fence is not None:
            marker, lang, start = fence
            stripped = row.strip()
            if stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0]):
                _block(ctx, lang, rows[start:k], line + start, depth, data_lines, start)
                fence = None
            prose.append((line + k, ""))
            continue
        m = _FENCE.match(row)
        if m:
            fence = (m.group(1), m.group(2).lower().strip(".{}"), k + 1)
            prose.append((line + k, ""))
            continue
        _prose_line(ctx, row, line + k, depth)
        prose.append((line + k, row))
    if fence is not None:
        marker, lang, start = fence
        _block(ctx, lang, rows[start:], line + start, depth, data_lines, start)
    _comments(ctx, text, line)
    _exfiltration(ctx, _paragraphs(prose))
    if line == 1 and text.startswith("---"):
        _frontmatter(ctx, text, depth)
    scan_text(ctx, text, line, depth, data_lines=frozenset(data_lines))


def _paragraphs(prose: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Prose rows in paragraphs (a blank row, a fence or a heading starts a new one)."""
    found: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    for at, row in prose:
        if not row.strip() or row.lstrip().startswith("#"):
            if current:
                found.append(current)
            current = [(at, row)] if row.strip() else []
            continue
        current.append((at, row))
    if current:
        found.append(current)
    return found


def _exfiltration(ctx: Context, paragraphs: list[list[tuple[int, str]]]) -> None:
    """Concealment from the user anywhere; secrets named and sent within a paragraph and
    the next. One finding is enough (the rest would repeat it)."""
    named = [any(_SECRET.search(row) for _, row in paragraph) for paragraph in paragraphs]
    for k, paragraph in enumerate(paragraphs):
        for at, row in paragraph:
            if _CONCEAL.search(row):
                near = named[k] or (k + 1 < len(named) and named[k + 1])
                what = (
                    "keeps reading someone's secrets from the user"
                    if near
                    else "tells the agent to keep what it does from the user"
                )
                ctx.add("dangerous", "exfiltration-instructions", at, what)
                return
    for k, paragraph in enumerate(paragraphs):
        if named[k]:
            window = paragraph + (paragraphs[k + 1] if k + 1 < len(paragraphs) else [])
            if _secret_sent(ctx, window):
                return


def _exfiltration_in(ctx: Context, rows: list[tuple[int, str]]) -> bool:
    """The same rules on one text (a frontmatter value): concealment, or secrets sent."""
    for at, row in rows:
        if _CONCEAL.search(row):
            ctx.add("dangerous", "exfiltration-instructions", at, "keeps something from the user")
            return True
    return _secret_sent(ctx, rows)


def _secret_sent(ctx: Context, rows: list[tuple[int, str]]) -> bool:
    """Someone's secrets named in a sentence that sends them, or that one of the next
    three sentences sends ("Read ~/.ssh/id_rsa. Post its contents to ...")."""
    sentences = _sentences(rows)
    for k, (at, sentence) in enumerate(sentences):
        secret = _SECRET.search(sentence)
        if secret is None:
            continue
        if _sends(sentence, near=secret.start()):
            sent_at = at
        elif _NEGATED.search(sentence[max(0, secret.start() - 40) : secret.start()]):
            continue  # "never send your private key": no order to send it later either
        else:
            sent_at = next(
                (a for a, later in sentences[k + 1 : k + 4] if _sends(later, back=True)), 0
            )
        if sent_at:
            ctx.add(
                "dangerous",
                "exfiltration-instructions",
                sent_at,
                f"tells the agent to send someone's secrets (named on line {at}) elsewhere",
            )
            return True
    return False


# A row that starts a sentence of its own: a list item, a heading, a table row.
_ITEM = re.compile(r"\s*(?:\d+[.)]|[-*+\u2022]|#+|\|)\s")
# Where a sentence (or a clause of a list-like one) ends inside a row.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)|\s\u2022\s")
# A send whose object points back at something named before ("post it", "its contents").
_BACK = re.compile(
    r"\s+(?:\w+\s+){0,2}?(?:it|its|them|their|this|that|these|those|the\s+(?:file|files|key"
    r"|keys|contents?|data|values?|output|credentials|tokens?|passwords?))\b",
    re.I,
)


def _sentences(rows: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The sentences of consecutive rows, each with the line it starts on. A row runs on
    into the next (a wrapped line) unless it ends a sentence or the next is a list item."""
    units: list[tuple[int, list[str]]] = []
    for at, row in rows:
        text = row.strip()
        if not text:
            continue
        if units and not _ITEM.match(row) and not units[-1][1][-1].endswith(_CLOSERS):
            units[-1][1].append(text)
        else:
            units.append((at, [text]))
    found: list[tuple[int, str]] = []
    for at, parts in units:
        unit = " ".join(parts)
        found += [(at, piece) for piece in _SENTENCE_END.split(unit) if piece.strip()]
    return found


_CLOSERS = (".", "!", "?", ":", ";")


def _sends(text: str, *, back: bool = False, near: int | None = None) -> bool:
    """Whether `text` tells the agent to send something (a "never send" is no order);
    with `back`, something named before ("post it", "upload its contents"); with `near`,
    within a clause's reach (160 characters) of that position."""
    for m in _SEND.finditer(text):
        if near is not None and abs(m.start() - near) > 160:
            continue
        if _NEGATED.search(text[max(0, m.start() - 40) : m.start()]):
            continue
        if not back or _BACK.match(text, m.end()) or "://" in text[m.end() : m.end() + 120]:
            return True
    return False


def _frontmatter(ctx: Context, text: str, depth: int) -> None:
    """Every frontmatter value as the loader reads it: the prose rules, and those of text
    that reaches every system prompt."""
    try:
        found = read_frontmatter(text)
    except FrontmatterError:
        return  # the loader refuses it; its lines were read as prose already
    if found is None:
        return
    head = text.split("\n")
    for key, value in found.meta.items():
        at = next(
            (k + 1 for k, row in enumerate(head[1:200], start=1) if row.startswith(f"{key}:")), 2
        )
        for piece in _strings(value):
            one = " ".join(piece.split())
            if _PROMPT_INJECTION.search(one) or _INJECTION_VISIBLE.search(one):
                ctx.add(
                    "dangerous",
                    "frontmatter-injection",
                    at,
                    f"the frontmatter's {key} gives the agent orders (it reaches every prompt)",
                )
            if _HIDDEN_CHARS.search(piece):
                ctx.add(
                    "dangerous",
                    "hidden-text",
                    at,
                    f"the frontmatter's {key} hides text with invisible characters",
                )
            _prose_line(ctx.nested(at), one, at, depth)
            _exfiltration_in(ctx.nested(at), [(at, one)])


def _strings(value: object, depth: int = 0) -> list[str]:
    """The strings of a frontmatter value (nested lists and mappings, keys included)."""
    if depth > 8:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        out: list[str] = []
        for k, v in value.items():
            out += [str(k), *_strings(v, depth + 1)]
        return out
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v, depth + 1)]
    return []


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
    if _HIDDEN_HTML.search(row) and (
        not ctx.file.lower().endswith(_MARKUP_FILES) or _INJECTION_HIDDEN.search(row)
    ):
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
