"""The redactor (engine/redact.py): each well-known token shape, configured secret values
and secret-looking .env entries are replaced; what only looks alike is left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import Config
from habakkuk.engine.redact import MARK, REDACTOR, Redactor, redact_blocks, secret_values

# (what, text holding it, the secret that must be gone)
SHAPES = [
    ("Anthropic key", "key=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv_wx", "sk-ant-api03-AbCdEfGhIjKl"),
    (
        "OpenAI key",
        "using sk-proj-AbCdEfGhIjKlMnOpQrSt1234 now",
        "sk-proj-AbCdEfGhIjKlMnOpQrSt1234",
    ),
    ("Slack bot token", "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxb-1234567890"),
    ("Slack user token", "token xoxp-1111111111-2222222222-abcdef", "xoxp-1111111111"),
    ("GitHub classic", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2C3d4E5f6"),
    ("GitHub OAuth", "gho_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "gho_A1b2C3d4E5f6"),
    ("GitHub fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP", "github_pat_11ABC"),
    ("AWS access key id", "id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    (
        "AWS secret after its id",
        "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "AWS secret setting",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    ("Google API key", "?q=1 AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIzaSyA1b2C3d4E5f6G7h8"),
    (
        "Telegram bot token",
        "POST https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/getMe",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ),
    (
        "Telegram token alone",
        "token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 set",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ),
    (
        "JWT",
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
    (
        "PEM private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nq83Jd==\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7bq",
    ),
    ("OpenSSH private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r\n", "BEGIN OPENSSH"),
    ("Bearer credential", "sent Bearer abc123def456ghi789 to it", "abc123def456ghi789"),
    ("Authorization header", "Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ("Authorization token", 'headers {"authorization": "token abcdefghij"}', "abcdefghij"),
    ("URL password", "postgresql://app:s3cr3tpass@db:5432/x", "s3cr3tpass"),
    ("secret query", "GET /feed?api_key=abc123xyz&page=2", "abc123xyz"),
    ("Stripe key", "sk_live_AbCdEfGhIjKlMnOpQrSt", "sk_live_AbCdEfGhIjKlMnOpQrSt"),
]

# Text that looks a little like a secret and must come out as it went in.
NEAR_MISSES = [
    "the task-runner finished in 1.2s",
    "sk-short is not a key",
    "ask-ant-ennas are antennas",
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 merged",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "GET /v1/models?page=2&limit=10",
    "https://example.com/path/to/thing",
    "bearer credentials are checked in constant time",
    "Authorization header missing",
    "AKIA is how AWS ids start",
    "phone 12345678: call later",
    "eyJ alone is not a JWT",
    "ghp_short",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "job j_01HX3ABC failed: the provider said 529 overloaded",
    "session s_abc123 of agent main, 1,234 tokens, $0.0123",
]


@pytest.mark.parametrize(("what", "text", "secret"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_known_shape_is_redacted(what: str, text: str, secret: str) -> None:
    out = Redactor().text(text)
    assert secret not in out, what
    assert MARK in out


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(text: str) -> None:
    assert Redactor().text(text) == text


def test_a_header_or_setting_name_stays_readable() -> None:
    redactor = Redactor()
    assert redactor.text("Authorization: Bearer abc123def456") == f"Authorization: Bearer {MARK}"
    assert redactor.text("https://bob:hunter22@example.com/") == f"https://bob:{MARK}@example.com/"
    assert redactor.text("/x?token=abc123&y=2") == f"/x?token={MARK}&y=2"


def test_configured_values_are_redacted_wherever_they_appear() -> None:
    redactor = Redactor(["plain-looking-value", "tiny"])
    out = redactor.text("the key plain-looking-value was refused; tiny stays")
    assert "plain-looking-value" not in out
    assert "tiny stays" in out  # too short to redact: it would match words


def test_a_value_inside_another_is_not_left_half_redacted() -> None:
    redactor = Redactor(["abcdef", "abcdefghijkl"])
    assert redactor.text("x abcdefghijkl y") == f"x {MARK} y"


def test_json_values_are_walked_and_keys_kept() -> None:
    redactor = Redactor(["hunter2hunter2"])
    value = {"cmd": ["login", "hunter2hunter2"], "n": 3, "hunter": True}
    assert redactor.value(value) == {"cmd": ["login", MARK], "n": 3, "hunter": True}


def test_message_blocks_keep_thinking_signatures() -> None:
    REDACTOR.use_values(["sekrit-value-1"])
    try:
        blocks: list[dict[str, Any]] = [
            {"type": "thinking", "text": "sekrit-value-1", "signature": "sig"},
            {
                "type": "tool_use",
                "tool_use_id": "t1",
                "tool": "exec",
                "input": {"c": "sekrit-value-1"},
            },
            {"type": "tool_result", "tool_use_id": "t1", "text": "got sekrit-value-1"},
            {"type": "text", "text": "fine"},
        ]
        out = redact_blocks(blocks)
        assert out[0] == blocks[0]  # replayed to the provider as signed
        assert out[1]["input"] == {"c": MARK}
        assert out[2]["text"] == f"got {MARK}"
        assert out[3] is blocks[3]
        assert redact_blocks(out[3:]) == out[3:]
    finally:
        REDACTOR.use_values([])


def test_secret_values_come_from_the_config_the_env_and_dot_env(tmp_path: Path) -> None:
    from habakkuk.engine.config import ProviderConfig

    config = Config()
    config.providers["x"] = ProviderConfig(type="openai", key_env="X_KEY")
    env = {"X_KEY": "value-of-x-key-123", "UNRELATED": "not-a-secret-at-all"}
    dot_env = {
        "MY_TOKEN": "token-from-dot-env",
        "COLOR": "blue-and-green",
        "RANDOM_THING": "Zx81Qp02Lm93Nb74Vc65Xz56Wq47Er38",
    }
    found = secret_values(config, env, dot_env)
    assert "value-of-x-key-123" in found
    assert "token-from-dot-env" in found
    assert "Zx81Qp02Lm93Nb74Vc65Xz56Wq47Er38" in found  # looks random: a credential
    assert "blue-and-green" not in found
    assert "not-a-secret-at-all" not in found


def test_text_with_nothing_to_hide_is_returned_as_is() -> None:
    text = "turn t_1 finished in 1.2s"
    assert Redactor(["something-else"]).text(text) is text
