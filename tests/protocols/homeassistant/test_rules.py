"""The domain rules of ha_call_service: a corpus of calls, each allowed, confirmed or refused."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.protocols.homeassistant.rules import RuleError, build_call, confirming, refusal

ALLOW = ["light", "switch", "media_player", "homeassistant", "scene"]
CONFIRM = ["lock", "cover", "alarm_control_panel"]

# (domain, service, entity_id, data) -> "allow", "confirm", or a piece of the refusal.
CORPUS: list[tuple[str, str, Any, Any, str]] = [
    ("light", "turn_off", "light.kitchen", None, "allow"),
    ("light", "turn_on", ["light.kitchen", "light.hall"], {"brightness": 80}, "allow"),
    ("light", "turn_off", None, {"entity_id": "light.a, light.b"}, "allow"),
    ("light", "turn_off", None, {"area_id": "kitchen"}, "allow"),  # a light service: lights only
    ("light", "turn_off", "all", None, "allow"),  # every light, lights only
    ("scene", "turn_on", "scene.movie", None, "allow"),
    ("lock", "unlock", "lock.front_door", None, "confirm"),
    ("cover", "open_cover", None, {"target": {"entity_id": "cover.garage"}}, "confirm"),
    ("homeassistant", "turn_off", "lock.front_door", None, "confirm"),  # entity's domain
    ("homeassistant", "turn_off", ["light.kitchen", "switch.fan"], None, "allow"),
    ("light", "turn_off", ["light.kitchen", "lock.front_door"], None, "confirm"),
    ("climate", "set_temperature", "climate.living", {"temperature": 30}, "climate is not"),
    ("light", "turn_off", "climate.living", None, "climate is not"),
    ("light", "turn_off", None, {"entity_id": ["light.a", "vacuum.robot"]}, "vacuum is not"),
    ("light", "turn_off", None, {"target": {"entity_id": "camera.door"}}, "camera is not"),
    ("homeassistant", "turn_off", None, {"area_id": "house"}, "may not target area_id"),
    ("homeassistant", "turn_off", None, {"device_id": "abc"}, "may not target device_id"),
    ("homeassistant", "turn_off", None, {"target": {"floor_id": "up"}}, "may not target floor_id"),
    ("homeassistant", "turn_on", None, {"label_id": ["all"]}, "may not target label_id"),
    ("homeassistant", "turn_off", "all", None, "may not target all entities"),
    ("homeassistant", "restart", None, None, "allow"),  # the owner allowed the domain
    ("script", "turn_on", "script.anything", None, "script is not"),
]


@pytest.mark.parametrize(("domain", "service", "entity", "data", "expected"), CORPUS)
def test_each_call_of_the_corpus_is_allowed_confirmed_or_refused_as_the_rules_say(
    domain: str, service: str, entity: Any, data: Any, expected: str
) -> None:
    call = build_call(domain, service, entity, data)
    refused = refusal(call, ALLOW, CONFIRM)
    if expected == "allow":
        assert refused == ""
        assert confirming(call, CONFIRM) == []
    elif expected == "confirm":
        assert refused == ""
        assert confirming(call, CONFIRM)
    else:
        assert expected in refused


@pytest.mark.parametrize(
    ("domain", "service", "entity", "data"),
    [
        ("light/../config", "turn_off", None, None),
        ("light", "turn_off?x=1", None, None),
        ("Light", "turn_off", None, None),
        ("light", "turn_off", "../../api/config", None),
        ("light", "turn_off", "light.kitchen/x", None),
        ("light", "turn_off", 5, None),
        ("light", "turn_off", None, {"entity_id": {"x": 1}}),
        ("light", "turn_off", None, {"target": "light.kitchen"}),
        ("light", "turn_off", None, ["not", "an", "object"]),
    ],
)
def test_a_malformed_call_is_refused_before_any_path_is_built(
    domain: str, service: str, entity: Any, data: Any
) -> None:
    with pytest.raises(RuleError):
        build_call(domain, service, entity, data)


def test_the_entity_id_argument_joins_the_datas_and_the_input_is_left_as_given() -> None:
    data = {"entity_id": "light.a", "target": {"entity_id": "light.b"}, "brightness": 5}
    call = build_call("light", "turn_on", ["light.c"], data)
    assert call.entities == ("light.c", "light.a", "light.b")
    assert call.body["entity_id"] == ["light.c", "light.a", "light.b"]
    assert call.body["brightness"] == 5
    assert data == {"entity_id": "light.a", "target": {"entity_id": "light.b"}, "brightness": 5}


def test_nothing_is_allowed_when_no_domain_is_listed() -> None:
    assert "not an allowed domain" in refusal(build_call("light", "turn_off"), [], [])
