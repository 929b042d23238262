"""Rules that read any text: links, hidden characters, encoded blobs, and the languages
without a parser here (JavaScript/TypeScript, Ruby, Perl, PowerShell, AppleScript, batch).

Every regular expression is linear on hostile input: character classes with bounded or
possessive-free single repeats, no nested quantifiers, no backreferences. Commands found in
other languages' strings (``execSync("curl ... | sh")``, Ruby backticks, ``system "..."``)
go to the shell scanner.
"""

from __future__ import annotations

import base64
import binascii
import re

from habakkuk.knowledge.scan.context import Context
from habakkuk.knowledge.scan.paths import PASTE_HOSTS, SHORTENER_HOSTS, host_risk, url_risk

__all__ = ["scan_foreign", "scan_text"]

_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\"'`)\]}|]{1,2000}", re.I)
_BARE_HOST = re.compile(
    r"(?<![\w.@/-])(?:www\.)?("
    + "|".join(re.escape(h) for h in sorted(PASTE_HOSTS | SHORTENER_HOSTS, key=len, reverse=True))
    + r")/[\w/?=&.%-]{2,200}",
    re.I,
)
# gawk's network files with a two-way pipe: commands read from the socket and run.
_AWK_INET = re.compile(r"/inet6?/(?:tcp|udp)/\d+/[^\s\"'/]+/\d+[^\n]{0,400}?\|&\s*getline")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_ZERO_WIDTH = re.compile("[\u200b-\u200d\u2060\u2062-\u2064\u180e\ufeff]")
BLOB = re.compile(r"[A-Za-z0-9+/]{200,}={0,2}")
_HEX_BLOB = re.compile(r"(?:\\x[0-9a-fA-F]{2}){60,}|[0-9a-fA-F]{400,}")

# PowerShell, wherever it is written (a .ps1, a fenced block, a one-liner in prose).
_PS_IEX = re.compile(r"\|\s*iex\b|\biex\s*[(\"'$]|invoke-expression|\[scriptblock\]::create", re.I)
_PS_DOWNLOAD = re.compile(
    r"\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|start-bitstransfer|curl\.exe|wget\.exe)\b"
    r"|downloadstring|downloadfile|downloaddata|net\.webclient|system\.net\.http",
    re.I,
)
_PS_ENCODED = re.compile(
    r"(?:^|\s)-(?:e|ec|en|enc|enco|encod|encode|encoded|encodedcommand)\s+[A-Za-z0-9+/=]{16,}", re.I
)
_PS_B64 = re.compile(r"frombase64string", re.I)
_PS_BYPASS = re.compile(
    r"-executionpolicy\s+(?:bypass|unrestricted)|-ep\s+bypass|set-mppreference|add-mppreference\s+-exclusion",
    re.I,
)

# Other languages: code run from a decode, and strings handed to a shell.
_JS_DECODED = re.compile(
    r"\b(?:eval|Function|execSync|exec)\s*\(\s*(?:atob|Buffer\.from|unescape|decodeURIComponent)\s*\(",
    re.I,
)
_RB_DECODED = re.compile(
    r"\beval\s*\(?\s*(?:Base64\.decode64|\[.{0,40}\]\.pack|Zlib::Inflate)", re.I
)
_PL_DECODED = re.compile(
    r"\beval\s*\(?\s*(?:decode_base64|pack\s*\(|MIME::Base64::decode|unpack)", re.I
)
_SHELL_STRING = re.compile(
    r"(?:\bexecSync|\bexec|\bspawnSync|\bspawn|\bexecFile|\bsystem|\bpopen|%x|\bIO\.popen|\bOpen3\.\w+|\bqx)"
    r"\s*[({]?\s*(?P<q>[\"'`])(?P<cmd>[^\"'`\n]{1,2000})(?P=q)"
)
_BACKTICKS = re.compile(r"`(?P<cmd>[^`\n]{1,2000})`")

# Reverse shells in the languages without a parser here: a network socket, and a shell
# (or code run from what arrives) wired to it, in the same program.
_NET_SOCKET = re.compile(
    r"\bfsockopen\b|\bTCPSocket\b|\bTCPClient\b|Net\.Sockets|\bnet\.(?:Socket|connect"
    r"|createConnection)\b|\bIO::Socket|\bsocket\s*\(\s*\w+\s*,\s*(?:PF|AF)_INET"
    r"|/inet6?/(?:tcp|udp)/|/dev/(?:tcp|udp)/|require\s*\(?\s*[\"']socket[\"']"
    r"|\bsocket\.(?:tcp|connect)\b|java\.net\.Socket|new\s+Socket\s*\(|\bstream_socket_client\b"
    r"|\bsocket_create\b|\bWebSocket\s*\(",
    re.I,
)
_SHELL_ON_SOCKET = re.compile(
    r"open\s*\(\s*STD(?:IN|OUT|ERR)\s*,\s*[\"']?[<>+]{0,2}&"  # perl: STDIN onto the socket
    r"|<&\s*%?[\w$]{1,12}\s*>&\s*%?[\w$]{1,12}"  # sh -i <&3 >&3 2>&3
    r"|\b(?:exec|system|popen|passthru|shell_exec|proc_open|spawn|execFile|execSync|spawnSync"
    r"|IO\.popen|Process\.start|os\.execute|io\.popen)\s*\(?\s*(?:sprintf\s*\(\s*)?"
    r"[\"'](?:/bin/|/usr/bin/)?(?:ba|z|da|k|a|c|tc)?sh(?:\.exe)?\b"
    r"|\b(?:spawn|exec|Start-Process|ProcessBuilder)\s*\(?\s*[\"'](?:cmd|powershell|pwsh)(?:\.exe)?[\"']"
    r"|\.pipe\s*\(\s*\w+\.stdin\s*\)"  # node: socket.pipe(sh.stdin)
    r"|\biex\b|Invoke-Expression"  # PowerShell runs what the stream read
    r"|Runtime\.getRuntime\(\)\.exec|\|&\s*getline",
    re.I,
)
# Recursive deletion of the home or the root in other languages (and the shell's spelling
# of it in PowerShell and batch files).
_HOME_OR_ROOT = (
    r"(?:os\.homedir\(\)|require\s*\(\s*[\"']os[\"']\s*\)\.homedir\(\)"
    r"|process\.env\.(?:HOME|USERPROFILE)|process\.env\[[\"'](?:HOME|USERPROFILE)[\"']\]"
    r"|Dir\.home|ENV\[[\"']HOME[\"']\]|File\.expand_path\(\s*[\"']~[\"']\s*\)"
    r"|\$ENV\{\s*[\"']?HOME[\"']?\s*\}|\$HOME\b|\$env:(?:USERPROFILE|HOMEPATH|HOME|SystemDrive)"
    r"|\$env:SystemRoot|%USERPROFILE%|%HOMEPATH%|%SystemDrive%|%SystemRoot%"
    r"|[\"'](?:/|~/?|[A-Za-z]:\\{1,2}|[A-Za-z]:/)[\"']|(?<![\w./\\-])(?:~|[A-Za-z]:\\))"
    # ...as the whole argument (or all of its entries), not the start of a longer path
    r"(?=\s*(?:[),;|]|$)|\s+-|[\\/]\*?[\"']?\s*(?:[),;|]|$))"
)
_FOREIGN_WIPE = re.compile(
    r"\b(?:rmSync|rmdirSync|removeSync|emptyDirSync|rimraf(?:\.sync)?|rm_rf|rm_r|remove_dir"
    r"|remove_entry(?:_secure)?|rmtree|remove_tree|fs\.rm|fs\.rmdir|del(?:\.sync)?|deleteSync)"
    r"\s*\(?\s*" + _HOME_OR_ROOT,
    re.I,
)
# PowerShell and batch: a delete command (at the start of a command) with a recursive
# flag and the home or root as an argument.
_PS_DELETE = re.compile(r"\s*(?:Remove-Item|ri|rm|rmdir|rd|del|erase)\b", re.I)
_PS_RECURSE = re.compile(r"\s(?:-Recurse|-r|/s)\b", re.I)
_HOME_ARG = re.compile(r"(?<![\w.-])" + _HOME_OR_ROOT, re.I)
_AS_PASSWORD = re.compile(r"display dialog[^\n]{0,200}hidden answer", re.I)
_AS_SHELL = re.compile(r"do shell script\s+\"(?P<cmd>[^\"\n]{1,2000})\"", re.I)


def scan_text(
    ctx: Context,
    text: str,
    line: int = 1,
    depth: int = 0,
    *,
    data_lines: frozenset[int] = frozenset(),
) -> None:
    """The rules for any text: links, hidden characters, PowerShell one-liners, blobs.

    `data_lines` (0-based offsets) are lines of a fenced data block, where an encoded blob
    is expected and not a finding.
    """
    for k, row in enumerate(text.split("\n")):
        if not row:
            continue
        at = line + k
        _links(ctx, row, at)
        if not row.isascii():
            if _BIDI.search(row):
                ctx.add(
                    "dangerous",
                    "bidi-override",
                    at,
                    "a bidirectional override hides the real order of the text",
                )
            if _TAGS.search(row):
                ctx.add(
                    "dangerous",
                    "hidden-text",
                    at,
                    "invisible Unicode tag characters carry hidden text",
                )
            if _ZERO_WIDTH.search(row.lstrip("\ufeff") if k == 0 else row):
                ctx.add(
                    "caution", "zero-width", at, "zero-width characters hide text or split words"
                )
        _powershell(ctx, row, at)
        if "/inet" in row and _AWK_INET.search(row):
            ctx.add(
                "dangerous", "reverse-shell", at, "runs commands read from a network socket (awk)"
            )
        if k not in data_lines and len(row) >= 200:
            _blobs(ctx, row, at, depth)


def _wipes_in_shell(row: str) -> bool:
    """`Remove-Item -Recurse -Force $HOME`, `rd /s /q %USERPROFILE%` (each command of a row)."""
    return any(
        _PS_DELETE.match(command) and _PS_RECURSE.search(command) and _HOME_ARG.search(command)
        for command in re.split(r"[;|&]", row)
    )


def _foreign_reverse_shell(ctx: Context, text: str, line: int) -> None:
    """A socket and a shell wired to it in one program (Perl, Ruby, PHP, Node, PowerShell,
    Lua, Java, awk): reported at the shell's line."""
    if not _NET_SOCKET.search(text):
        return
    shell = _SHELL_ON_SOCKET.search(text)
    if shell is not None:
        at = line + text.count("\n", 0, shell.start())
        ctx.add(
            "dangerous",
            "reverse-shell",
            at,
            "opens a network socket and wires a shell (or code it receives) to it",
        )


def _links(ctx: Context, row: str, at: int) -> None:
    if "://" in row:
        for m in _URL.finditer(row):
            found = url_risk(m.group(0).rstrip(".,;:!?*_"))
            if found:
                rule, message = found
                ctx.add("dangerous", rule, at, message)
    if "." in row:
        for m in _BARE_HOST.finditer(row):
            found = host_risk(m.group(1))
            if found:
                ctx.add("dangerous", found[0], at, found[1])


def _powershell(ctx: Context, row: str, at: int) -> None:
    low = row.lower()
    if (
        "iex" not in low
        and "invoke-" not in low
        and "-e" not in low
        and "scriptblock" not in low
        and "frombase64" not in low
    ):
        return
    if _PS_IEX.search(row):
        if _PS_DOWNLOAD.search(row):
            ctx.add(
                "dangerous",
                "powershell-remote-code",
                at,
                "PowerShell runs a download (iex of a web request)",
            )
        elif _PS_B64.search(row):
            ctx.add(
                "dangerous", "powershell-decoded-code", at, "PowerShell runs decoded (hidden) code"
            )
        else:
            ctx.add(
                "caution",
                "powershell-invoke-expression",
                at,
                "PowerShell Invoke-Expression runs text as code",
            )
    if _PS_ENCODED.search(row) and re.search(r"powershell|pwsh", row, re.I):
        ctx.add(
            "dangerous",
            "powershell-encoded",
            at,
            "PowerShell -EncodedCommand hides the command it runs",
        )
    if _PS_BYPASS.search(row):
        ctx.add(
            "caution",
            "powershell-bypass",
            at,
            "turns off PowerShell's execution policy or Defender",
        )


def _blobs(ctx: Context, row: str, at: int, depth: int) -> None:
    for m in BLOB.finditer(row):
        blob = m.group(0)
        ctx.add(
            "caution", "encoded-blob", at, f"a {len(blob)}-character base64 blob (hidden content)"
        )
        _decoded(ctx, blob, at, depth)
    if _HEX_BLOB.search(row):
        ctx.add("caution", "encoded-blob", at, "a long hex blob (hidden content)")


def _decoded(ctx: Context, blob: str, at: int, depth: int) -> None:
    """Scan what a base64 blob decodes to: an executable, or text with commands in it."""
    try:
        data = base64.b64decode(blob[: 4 * (len(blob) // 4)], validate=False)
    except (binascii.Error, ValueError):
        return
    if (
        data[:4] in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
        or data[:2] == b"MZ"
    ):
        ctx.add("dangerous", "executable", at, "a base64 blob that decodes to an executable")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    printable = sum(c.isprintable() or c in "\n\t\r" for c in text)
    if text and printable / len(text) > 0.95:
        nested = ctx.nested(at)
        nested.scan("shell", text, at, depth + 1)
        nested.scan("python-lenient", text, at, depth + 1)


def scan_foreign(ctx: Context, text: str, line: int = 1, depth: int = 0) -> None:
    """JavaScript, Ruby, Perl, PHP, Lua, PowerShell, AppleScript, batch, or text that did
    not parse: regex rules, with the strings they hand to a shell scanned as shell."""
    _foreign_reverse_shell(ctx, text, line)
    for k, row in enumerate(text.split("\n")):
        at = line + k
        if _FOREIGN_WIPE.search(row) or _wipes_in_shell(row):
            ctx.add(
                "dangerous",
                "destructive-command",
                at,
                "deletes the home folder or the root recursively",
            )
        if _JS_DECODED.search(row):
            ctx.add("dangerous", "js-decoded-code", at, "JavaScript runs decoded (hidden) code")
        if _RB_DECODED.search(row) or _PL_DECODED.search(row):
            ctx.add("dangerous", "decoded-code", at, "runs decoded (hidden) code with eval")
        if _AS_PASSWORD.search(row):
            ctx.add(
                "dangerous", "password-prompt", at, "a fake dialog asks for the user's password"
            )
        if "child_process" in row and re.search(
            r"\b(?:curl|wget)\b[^\n]{0,200}\|\s*(?:ba|z)?sh\b", row
        ):
            ctx.add("dangerous", "remote-code", at, "child_process runs a piped download")
        commands = [m.group("cmd") for m in _SHELL_STRING.finditer(row)]
        commands += [m.group("cmd") for m in _AS_SHELL.finditer(row)]
        if "`" in row and not row.lstrip().startswith(("//", "#", "*")):
            commands += [m.group("cmd") for m in _BACKTICKS.finditer(row) if " " in m.group("cmd")]
        nested = ctx.nested(at)
        for cmd in commands:
            nested.scan("shell", cmd, at, depth + 1)
