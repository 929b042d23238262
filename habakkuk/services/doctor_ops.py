"""The doctor's checks of `secrets:` (each reference read now, its failure said without
a value) and `telemetry:` (the optional extra installed)."""

from __future__ import annotations

from typing import Any, Literal

from habakkuk.engine.config import Config
from habakkuk.engine.i18n import t

# (status, name, detail): doctor.py makes each a Check (no import back: no cycle).
Found = tuple[Literal["ok", "FAIL"], str, str]


def secret_checks(env: Any) -> list[Found]:
    """One check per `secrets.refs` variable (blocking: sources run commands)."""
    from habakkuk.engine.secrets import SecretStore

    store = env.secrets
    if not isinstance(store, SecretStore):
        return []
    store.prefetch()
    checks: list[Found] = []
    for variable, ref in store.config.resolved.items():
        source = store.config.sources[ref.source]
        error = store.errors.get(variable)
        if error is None:
            detail = t("secrets.doctor_read", source=source.name, type=source.type)
            checks.append(("ok", f"secret {variable}", detail))
        else:
            detail = t("secrets.doctor_failed", source=source.name, type=source.type, error=error)
            checks.append(("FAIL", f"secret {variable}", detail))
    return checks


def telemetry_checks(config: Config) -> list[Found]:
    """With `telemetry:`, the OpenTelemetry SDK must be installed (the telemetry extra)."""
    import importlib.util

    if config.telemetry is None:
        return []
    try:
        found = importlib.util.find_spec("opentelemetry.sdk") is not None
        found = found and importlib.util.find_spec("opentelemetry.exporter") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return [("FAIL", "telemetry", t("telemetry.doctor_missing"))]
    url = config.telemetry.traces_url
    return [("ok", "telemetry", t("telemetry.doctor_ok", url=url))]
