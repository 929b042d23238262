"""The domain rules of a service call (spec 000 "Home Assistant").

A call is allowed only when its own domain and the domain of every entity it targets are
in `allow_domains` or `confirm`; when any of them is in `confirm`, a human says yes to
each call. The generic `homeassistant` domain (homeassistant.turn_off and the like) acts
on entities of any domain, so it may not target areas, devices, floors or labels, nor
"all" entities, which would reach domains nobody allowed. Targets are read wherever Home
Assistant reads them: the call's entity_id, and entity_id, area_id, device_id, floor_id
and label_id in its data, at the top or under `target`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

GENERIC_DOMAIN = "homeassistant"
# Targets that name a group of entities of any domain, resolved inside Home Assistant.
GROUP_TARGETS = ("area_id", "device_id", "floor_id", "label_id")
ALL_ENTITIES = "all"  # Home Assistant's ENTITY_MATCH_ALL
NO_ENTITY = "none"  # ENTITY_MATCH_NONE
DOMAIN = re.compile(r"[a-z0-9_]{1,64}")
SERVICE = re.compile(r"[a-z0-9_]{1,100}")
ENTITY_ID = re.compile(r"[a-z0-9_]{1,64}\.[a-z0-9_]{1,255}")


class RuleError(ValueError):
    """A call the rules refuse, or one so malformed it cannot be judged (the reason)."""


@dataclass(frozen=True)
class ServiceCall:
    """One service call, as it will be sent: its domain, service, the entities it names,
    whether it targets groups (areas, devices, floors, labels) and the JSON body."""

    domain: str
    service: str
    entities: tuple[str, ...]
    groups: tuple[str, ...]  # the GROUP_TARGETS keys it uses
    body: dict[str, Any]

    @property
    def summary(self) -> str:
        """`light.turn_off light.kitchen, light.hall` for prompts and cards."""
        named = ", ".join(self.entities)
        return f"{self.domain}.{self.service}" + (f" {named}" if named else "")

    def domains(self) -> list[str]:
        """Its own domain and every named entity's, each once, in order."""
        found = [self.domain] + [e.split(".", 1)[0] for e in self.entities if "." in e]
        return list(dict.fromkeys(found))


def _ids(value: Any, where: str) -> list[str]:
    """Entity ids from a string (comma-separated, as Home Assistant accepts) or a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise RuleError(f"{where} must be an entity id or a list of them")


def build_call(domain: str, service: str, entity_id: Any = None, data: Any = None) -> ServiceCall:
    """The call the arguments make (RuleError when malformed): `entity_id` joins the
    data's own entity_id, and every entity id is checked for its shape, so nothing a
    model writes can reach another path of the API."""
    if not DOMAIN.fullmatch(domain):
        raise RuleError(f"{domain!r} is not a domain (lowercase, like light)")
    if not SERVICE.fullmatch(service):
        raise RuleError(f"{service!r} is not a service name (lowercase, like turn_off)")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RuleError("data must be an object")
    body: dict[str, Any] = dict(data)
    scopes: list[dict[str, Any]] = [body]
    target = body.get("target")
    if target is not None:
        if not isinstance(target, dict):
            raise RuleError("data.target must be an object")
        target = body["target"] = dict(target)  # a copy: the call's input stays as given
        scopes.append(target)
    entities = _ids(entity_id, "entity_id")
    for scope in scopes:
        entities += _ids(scope.get("entity_id"), "data.entity_id")
    entities = list(dict.fromkeys(entities))
    for entity in entities:
        if entity not in (ALL_ENTITIES, NO_ENTITY) and not ENTITY_ID.fullmatch(entity):
            raise RuleError(f"{entity!r} is not an entity id (like light.kitchen)")
    if entity_id is not None:
        body["entity_id"] = entities if len(entities) != 1 else entities[0]
        if target is not None:
            target.pop("entity_id", None)  # named once, at the top
    groups = tuple(key for key in GROUP_TARGETS if any(key in scope for scope in scopes))
    return ServiceCall(domain, service, tuple(entities), groups, body)


def refusal(call: ServiceCall, allow: Iterable[str], confirm: Iterable[str]) -> str:
    """Why the rules refuse `call`, or "" when it may go (perhaps after a human's yes)."""
    permitted = set(allow) | set(confirm)
    if call.domain == GENERIC_DOMAIN:
        if call.groups:
            return (
                f"the generic {GENERIC_DOMAIN} domain may not target {', '.join(call.groups)} "
                "(that would reach any domain); name the entities instead"
            )
        if ALL_ENTITIES in call.entities:
            return f"the generic {GENERIC_DOMAIN} domain may not target all entities"
    for domain in call.domains():
        if domain not in permitted:
            listed = ", ".join(sorted(permitted)) or "none"
            what = "the call's domain" if domain == call.domain else "a target entity's domain"
            return (
                f"{domain} is not an allowed domain ({what}); allowed: {listed} "
                "(homeassistant.allow_domains and confirm)"
            )
    return ""


def confirming(call: ServiceCall, confirm: Sequence[str]) -> list[str]:
    """The call's domains that are confirm domains (a human says yes to each call)."""
    return [domain for domain in call.domains() if domain in confirm]
