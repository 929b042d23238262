"""What a path or a URL means to the scan: credentials, places outside the skill, payload hosts.

Shared by the shell and Python scanners (a path is a path whichever language names it) and
the text rules (a URL is a URL in a README or in a script).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from habakkuk.knowledge.skills.types import Severity

# Home spelled every way a script spells it; folded to "~" before the tables below.
_HOME = re.compile(
    r"^(?:~(?=/|$)|\$HOME(?=/|$)|\$\{HOME\}(?=/|$)|/home/[^/]+|/Users/[^/]+|/root(?=/|$))"
)

# Reading these is reading someone's secrets: a caution alone, exfiltration with a send.
STRONG_CREDENTIALS = re.compile(
    r"\.ssh(?:/|\b)|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/|\.aws\b|\.netrc\b|\.gnupg\b"
    r"|\.kube/config|\.docker/config\.json|gh/hosts\.yml|\.git-credentials|\.pypirc|\.npmrc"
    r"|Login Data|\bCookies(?:\.sqlite)?\b|\bkey[34]\.db\b|\blogins\.json\b|Local State"
    r"|\.mozilla/firefox|Google/Chrome|BraveSoftware|Keychains?/|\.keychain(?:-db)?\b"
    r"|\bauth\.json\b|HABAKKUK_HOME|\.habakkuk\b|/etc/shadow|\bwallet\.dat\b|\.electrum\b"
    r"|\.config/solana|\.bitcoin\b|\.gcloud\b|\.config/gcloud|\.azure/|\.terraform\.d/credentials"
)
# Secrets that ordinary scripts handle too (a project's .env, the environment):
# they matter only when sent somewhere in the same command.
WEAK_CREDENTIALS = re.compile(r"(?:^|/)\.env(?:\.[\w.-]+)?$|/proc/[^/\s]+/environ")

_SAFE_ABSOLUTE = re.compile(
    r"^/(?:tmp|var/tmp|private/tmp|dev/(?:null|stdout|stderr|tty|fd/)|proc/self/fd/)"
)
_DANGEROUS_HOME = re.compile(
    r"^~/\.(?:bash(?:rc|_profile|_login|_logout)|profile|zshrc|zprofile|zshenv|zlogin|zlogout"
    r"|cshrc|tcshrc|kshrc|inputrc|xinitrc|xprofile|xsessionrc|ssh|gnupg|aws|kube|docker|netrc"
    r"|npmrc|pypirc|git-credentials|gitconfig|habakkuk|config/(?:fish|autostart|systemd|habakkuk"
    r"|environment\.d)|local/share/applications|local/bin)(?:/|$)"
    r"|^~/Library/(?:LaunchAgents|LaunchDaemons|Application Support/com\.apple\.backgroundtask)"
)
_DANGEROUS_ANYWHERE = re.compile(
    r"LaunchAgents|LaunchDaemons|authorized_keys|sudoers|crontab|/cron\.|/cron/|profile\.d"
    r"|systemd/(?:system|user)|rc\.local|\$HABAKKUK_HOME|\$\{HABAKKUK_HOME\}|/etc/ld\.so"
)
_SYSTEM = re.compile(
    r"^/(?:etc|usr|bin|sbin|lib|lib64|boot|System|Library|root|var/spool|opt)(?:/|$)"
)


def home_folded(path: str) -> str:
    """The path with the home folder spelled `~`."""
    path = path.strip().strip("'\"")
    return _HOME.sub("~", path, count=1)


def write_risk(path: str) -> tuple[Severity, str] | None:
    """How bad writing to `path` is for a skill, with why; None for a place of its own.

    Persistence and credential places (shell rc files, ~/.ssh, crontabs, launch agents,
    /etc and the system folders) are dangerous; elsewhere in the home or outside the
    folder a caution; relative paths, /tmp and /dev/null nothing.
    """
    p = home_folded(path)
    if not p or p.startswith("&") or p.isdigit():
        return None
    if _DANGEROUS_ANYWHERE.search(p) or _DANGEROUS_HOME.match(p):
        return "dangerous", f"writes to {p} (persistence or credentials outside the skill)"
    if _SYSTEM.match(p):
        return "dangerous", f"writes to the system folder {p}"
    if p.startswith("~"):
        return "caution", f"writes to {p} in the home folder, outside the skill"
    if p.startswith("/") and not _SAFE_ABSOLUTE.match(p):
        return "caution", f"writes to {p}, outside the skill"
    return None


def credential_kind(text: str) -> str | None:
    """ "strong" (keys, cloud, browser, keychain, habakkuk's own), "weak" (.env), or None."""
    if STRONG_CREDENTIALS.search(text):
        return "strong"
    if WEAK_CREDENTIALS.search(text):
        return "weak"
    return None


PASTE_HOSTS = frozenset(
    [
        "pastebin.com",
        "paste.ee",
        "hastebin.com",
        "hastebin.skyra.pw",
        "ghostbin.com",
        "ghostbin.co",
        "rentry.co",
        "rentry.org",
        "transfer.sh",
        "termbin.com",
        "dpaste.com",
        "dpaste.org",
        "controlc.com",
        "justpaste.it",
        "0x0.st",
        "ix.io",
        "sprunge.us",
        "paste.rs",
        "pastes.io",
        "paste.c-net.org",
        "privatebin.net",
        "zerobin.net",
        "bpa.st",
        "paste.mozilla.org",
        "pastetext.net",
        "file.io",
        "anonfiles.com",
        "catbox.moe",
        "litterbox.catbox.moe",
        "temp.sh",
        "bashupload.com",
        "oshi.at",
        "gofile.io",
    ]
)
SHORTENER_HOSTS = frozenset(
    [
        "bit.ly",
        "tinyurl.com",
        "t.co",
        "goo.gl",
        "is.gd",
        "ow.ly",
        "cutt.ly",
        "rb.gy",
        "shorturl.at",
        "tiny.cc",
        "buff.ly",
        "rebrand.ly",
        "v.gd",
        "t.ly",
        "s.id",
        "bl.ink",
        "short.io",
        "lnkd.in",
        "clck.ru",
        "qrco.de",
    ]
)
EXECUTABLE_SUFFIXES = (
    ".exe", ".dmg", ".pkg", ".msi", ".appimage", ".scr", ".bat", ".cmd", ".vbs", ".jar",
    ".apk", ".app.zip", ".mpkg", ".ps1", ".hta", ".lnk",
)  # fmt: skip
_PRIVATE = [
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "169.254.0.0/16")
]


def _public_ip(host: str) -> bool:
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address):
        return not (addr.is_loopback or addr.is_link_local or addr.is_private)
    return not any(addr in net for net in _PRIVATE) and not addr.is_unspecified


def host_risk(host: str) -> tuple[str, str] | None:
    """(rule, message) for a payload host: a paste site, a URL shortener, a raw public IP."""
    host = host.lower().rstrip(".")
    bare = host[4:] if host.startswith("www.") else host
    if bare in PASTE_HOSTS or any(bare.endswith("." + h) for h in PASTE_HOSTS):
        return "paste-site", f"points at the paste/file-drop site {bare}"
    if bare in SHORTENER_HOSTS:
        return "url-shortener", f"points at the URL shortener {bare} (hides the real target)"
    if _public_ip(host):
        return "raw-ip-url", f"points at the raw IP address {host}"
    return None


def url_risk(url: str) -> tuple[str, str] | None:
    """(rule, message) when a URL is a payload host or an executable download, else None."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return None
    found = host_risk(host) if host else None
    if found and found[0] == "url-shortener" and parts.path.strip("/") == "":
        found = None  # the shortener's own home page, not a hidden target
    if found:
        rule, message = found
        return rule, f"{message}: {url[:120]}"
    path = parts.path.lower()
    if path.endswith(EXECUTABLE_SUFFIXES):
        return "executable-download", f"links to an executable download: {url[:120]}"
    return None
