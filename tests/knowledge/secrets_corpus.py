"""Text that holds a secret, one sample per format the scanner knows, and text that does not.

The samples are built from parts so that this file itself does not trip secret scanners.
"""

from __future__ import annotations

_R = "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xYz"  # 34 mixed characters

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
]
