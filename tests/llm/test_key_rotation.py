"""Key rotation and per-key cooldowns."""

from __future__ import annotations

import pytest

from habakkuk.engine.llm import keys
from habakkuk.engine.llm.keys import AUTH_COOLDOWN, RATE_LIMIT_COOLDOWN, KeyRotation
from habakkuk.engine.llm.provider import ErrorClass, ProviderError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_key_is_used_until_it_fails() -> None:
    rotation = KeyRotation(Clock())
    assert rotation.pick("p", ["a", "b"]) == "a"
    rotation.report("p", "a", None)
    assert rotation.pick("p", ["a", "b"]) == "a"


def test_rate_limit_cools_the_key_for_retry_after_then_it_is_usable_again() -> None:
    clock = Clock()
    rotation = KeyRotation(clock)
    rotation.report("p", "a", ProviderError("rate_limit", "slow down", retry_after=12))
    assert rotation.pick("p", ["a", "b"]) == "b"
    assert rotation.cooldown("p", "a") == pytest.approx(12)
    clock.now += 12.5
    assert rotation.cooldown("p", "a") == 0
    # The rotation stays on b (no flapping back) while b works.
    assert rotation.pick("p", ["a", "b"]) == "b"


def test_rate_limit_without_retry_after_uses_the_default_cooldown() -> None:
    rotation = KeyRotation(Clock())
    rotation.report("p", "a", ProviderError("rate_limit", "x"))
    assert rotation.cooldown("p", "a") == pytest.approx(RATE_LIMIT_COOLDOWN)


@pytest.mark.parametrize("error_class", ["auth", "billing"])
def test_auth_and_billing_failures_cool_the_key_for_long(error_class: ErrorClass) -> None:
    rotation = KeyRotation(Clock())
    rotation.report("p", "a", ProviderError(error_class, "no"))
    assert rotation.cooldown("p", "a") == pytest.approx(AUTH_COOLDOWN)
    assert rotation.pick("p", ["a", "b"]) == "b"


@pytest.mark.parametrize("error_class", ["server", "overloaded", "network", "bad_request"])
def test_errors_that_are_not_about_the_key_cause_no_cooldown(error_class: ErrorClass) -> None:
    rotation = KeyRotation(Clock())
    rotation.report("p", "a", ProviderError(error_class, "x"))
    assert rotation.cooldown("p", "a") == 0
    assert rotation.pick("p", ["a", "b"]) == "a"


def test_when_every_key_cools_down_the_first_to_recover_is_used() -> None:
    rotation = KeyRotation(Clock())
    rotation.report("p", "a", ProviderError("rate_limit", "x", retry_after=50))
    rotation.report("p", "b", ProviderError("rate_limit", "x", retry_after=5))
    assert rotation.pick("p", ["a", "b"]) == "b"


def test_providers_have_separate_cooldowns() -> None:
    rotation = KeyRotation(Clock())
    rotation.report("p", "shared", ProviderError("auth", "x"))
    assert rotation.pick("q", ["shared", "other"]) == "shared"


def test_no_keys_means_none() -> None:
    assert KeyRotation().pick("p", []) is None


def test_habakkuk_no_keyring_turns_the_keyring_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HABAKKUK_NO_KEYRING", "1")
    assert keys.keyring_backend() is None
    assert keys.keyring_get("ANY") is None
    assert keys.keyring_set("ANY", "value") is False


def test_the_fail_backend_counts_as_no_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    import keyring
    from keyring.backends import fail

    monkeypatch.delenv("HABAKKUK_NO_KEYRING", raising=False)
    monkeypatch.setattr(keyring, "get_keyring", fail.Keyring)
    assert keys.keyring_backend() is None
