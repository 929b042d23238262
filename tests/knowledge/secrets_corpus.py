"""Text that holds a secret, one sample per format the scanner knows, and text that does not.

The samples are built from parts so that this file itself does not trip secret scanners.
"""

from __future__ import annotations

_R = "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xYz"  # 34 mixed characters
# A private key's base64 body (the start of a PKCS#8 RSA key), as a paste shows it.
_DER = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu"
)


def _wrapped(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def _full_width(text: str) -> str:
    """ASCII as the full-width forms an East Asian keyboard types (U+FF01..U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


SECRETS: dict[str, str] = {
    "openai": "my key is sk-" + _R,
    "openai project": "OPENAI sk-proj-" + _R + "_x-9",
    "anthropic": "sk-ant-api03-" + _R,
    "github classic": "token ghp_" + _R[:36].ljust(36, "Q"),
    "github fine grained": "github_pat_11ABCDEFG0" + _R,
    "github oauth": "gho_" + _R,
    "slack": "xoxb-1234567890-" + "abcdefghijkl",
    "aws access key": "AKIA" + "IOSFODNN7EXAMPLE",
    "aws session key": "ASIA" + "QWERTYUIOPASDFGH",
    "aws secret assignment": "aws_secret_access_key = "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "google": "AIza" + "SyA-" + _R,
    "telegram": "bot 123456789:" + "AAE" + _R[:32],
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N",
    "bearer": "Authorization: Bearer " + "abc123def456ghi789",
    "pem": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
    "rsa pem": "-----BEGIN RSA "
    + "PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "url credentials": "db at postgres://admin:" + "s3cretpw@db.example.com/app",
    "password assignment": "wifi password: " + "hunter2-blue",
    "db password env": "DB_PASSWORD=" + "Tr0ub4dor&3",
    "api key assignment": 'api_key = "' + 'x9f8e7d6c5b4"',
    "random token": "session " + "Zx8Qp2Lm9Rt4Vb7Nc1Kd6Hs3Jf5Gw0Ya",
    "card spaces": "card 4111 1111 1111 " + "1111 exp 12/29",
    "card dashes": "visa 4012-8888-8888-" + "1881",
    "card plain": "amex 378282246310005",
    # The eleven forms that slipped through before (issue 25): each disguised as a person
    # or a paste would disguise it.
    "pem lower-case header": "-----begin openssh "
    + "private key-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----end openssh private key-----",
    "key body wrapped at 28": "Deploy key (body only):\n" + _wrapped(_DER, 28),
    "key broken by a newline": "OpenAI key sk-proj-" + _R[:10] + "\n" + _R[10:],
    "aws key broken by a newline": "backup user AKIA" + "IOSF\nODNN7EXAMPLE",
    "basic auth header": "curl -H 'Authorization: Basic " + "YWRtaW46aHVudGVyMi1ibHVl' ...",
    "full-width key": "the key is " + _full_width("sk-proj-" + _R),
    "dot-separated key": "AKIA" + ".IOSF.ODNN.7EXA.MPLE (the AWS key, dotted)",
    "spelled-out key": "key: " + " ".join("sk-proj-" + _R[:20]),
    "zero-width key": "gh" + "\u200bp_" + _R[:20] + "\u200b" + _R[20:],
    "db pass env": "DB_HOST=db.internal\nDB_PASS=" + "Xk7#pq92mz",
    "pw line": "bank login for Sam\npw: " + "Tr0ub4dor&3x",
    "wifi passphrase": "Home Wi-Fi passphrase: " + "purple elephant dancing slowly",
    "pin": "Bank card PIN: " + "4921",
    "pin in words": "my phone PIN is " + "739104",
    "hex signing key": "Webhook signing key "
    + "9c1185a5c5e9fc54612808977ee8f548b2258d31"
    + "7a3f02be",
}

# Secrets that only the home knows: written to its .env and named by the config.
ENV_SECRETS: dict[str, str] = {
    "CUSTOM_SERVICE_KEY": "correct horse battery",  # named by the config (key_env)
    "HOME_ROUTER_PASSWORD": "plainpassphrase",  # a secret-looking .env entry
}

HARMLESS: list[str] = [
    "Flat white with oat milk, no sugar.",
    "The commit was 3f786850e387550fdab836ed7e6dc881de23001b on main.",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "Request id 123e4567-e89b-12d3-a456-426614174000 failed.",
    "Config lives in /home/alice/.config/habakkuk/agents/main/memory/notes.md",
    "The class AbstractSingletonProxyFactoryBean is confusing.",
    "Password is stored in 1Password; the token: see settings.",
    "password: <your password>",
    "Call me on +44 20 7946 0958 after 6pm.",
    "Order 12345678901 shipped.",
    "max_tokens: 4096 and review_budget: 200000",
    "https://example.com/path?page=2",
    "A long word: antidisestablishmentarianismexplained",
    # Look-alikes of the forms above: hashes and commit ids in prose, UUIDs, order numbers.
    "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8; see the pull request.",
    "Key change: commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 moved the config.",
    "The ISO's SHA-256 is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.",
    "MD5 checksum d41d8cd98f00b204e9800998ecf8427e matches the download.",
    "SHA1 da39a3ee5e6b4b0d3255bfef95601890afd80709 is the empty file.",
    "git log shows 3f78685, in full 3f786850e387550fdab836ed7e6dc881de23001b.",
    "Tenant 550e8400-e29b-41d4-a716-446655440000 was migrated on Monday.",
    "Order #112-4837291-5503412 arrives Thursday.",
    "Invoice INV-2026-004512 was paid by bank transfer.",
    "Tracking number 1Z999AA10123456784 (UPS).",
    "Build 2026.03.14.1827 passed; version 4.12.0-rc.3.",
    "The token budget is 200000 tokens per day.",
    "Password rules: at least 12 characters and one digit.",
    "PIN-protected since 2019; ask Sam for the code.",
    "The API key lives in the team vault, not here.",
    "The Wi-Fi passphrase is on the sticker under the router.",
    "Secret Santa budget is 25 EUR.",
    "The compass bearing: 270 degrees.",
    "Boarding pass: LH1234, gate 22.",
    "Basic understanding of SQL is enough for the course.",
    "Signing the lease on 2026-04-01; key handover at 10:00.",
    "Pinned message from 2024-05-01: standup at 9.",
]
