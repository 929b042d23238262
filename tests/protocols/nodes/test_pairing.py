"""Pairing codes over POST /nodes/pair: one use, expiry, wrong codes, the throttle of
twenty failures a minute, and a name paired again replacing its secret."""

from __future__ import annotations

import time

from habakkuk.protocols.nodes.hub import THROTTLE_FAILURES, NodeHub, Throttle
from habakkuk.protocols.nodes.store import CODE_ALPHABET, digest
from tests.conftest import mock_config
from tests.protocols.nodes.conftest import NODES
from tests.protocols.nodes.helpers import new_code, redeem
from tests.server.conftest import Served, ServeFactory


def _hub(served: Served) -> NodeHub:
    hub = served.runtime.devices
    assert hub is not None
    return hub


async def test_a_code_pairs_once_and_only_its_hash_is_kept(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    code = await new_code(served)
    assert set(code) <= set(CODE_ALPHABET)
    store = await _hub(served).store()
    rows = await store.db.fetchall("SELECT code_hash FROM pair_codes")
    assert [row["code_hash"] for row in rows] == [digest(code)]
    # Typed loosely (lower case, a dash) it still pairs: the code is what counts.
    paired = await redeem(served, f"{code[:5].lower()}-{code[5:]}", "phone")
    assert paired["name"] == "phone" and len(paired["secret"]) >= 43  # 256 bits
    again = await redeem(served, code, "other", status=401)
    assert "wrong, used or expired" in again["error"]
    assert await store.db.fetchall("SELECT code_hash FROM pair_codes") == []
    record = await store.get("phone")
    assert record is not None and record.secret_hash == digest(paired["secret"])


async def test_an_expired_or_wrong_code_is_refused(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    store = await _hub(served).store()
    old = await store.new_code(600, now=time.time() - 601)
    refused = await redeem(served, old.code, "phone", status=401)
    assert "expired" in refused["error"]
    await redeem(served, "ABCDEFGHJK", "phone", status=401)
    bad_name = await redeem(served, await new_code(served), "../etc", status=400)
    assert "not a node name" in bad_name["error"]
    assert await store.nodes() == []


async def test_twenty_failures_a_minute_close_pairing_for_everyone(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    good = await new_code(served)
    for _ in range(THROTTLE_FAILURES):
        await redeem(served, "WRONGWRONG", "phone", status=401)
    refused = await redeem(served, good, "phone", status=429)
    assert "too many failed attempts" in refused["error"]
    # A wrong secret counts too, and is refused the same way while the door is closed.
    async with served.client.get(
        served.url + "/nodes/events",
        headers={"X-Habakkuk-Node": "phone", "Authorization": "Bearer nope"},
    ) as response:
        assert response.status == 429
    # A minute later (a throttle whose window has moved on), the unused code still pairs.
    _hub(served).throttle = Throttle()
    assert (await redeem(served, good, "phone"))["name"] == "phone"


def test_the_throttle_opens_again_once_its_failures_are_a_minute_old() -> None:
    throttle = Throttle()
    for second in range(THROTTLE_FAILURES):
        throttle.failed(now=1000.0 + second)
    assert throttle.closed(now=1000.0 + THROTTLE_FAILURES)
    assert throttle.closed(now=1059.9)
    assert not throttle.closed(now=1060.5)  # the first failure left the window


async def test_pairing_a_name_again_replaces_its_secret(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    first = await redeem(served, await new_code(served), "phone")
    second = await redeem(served, await new_code(served), "phone")
    hub = _hub(served)
    assert await (await hub.store()).check("phone", second["secret"]) is not None
    assert await (await hub.store()).check("phone", first["secret"]) is None


async def test_the_node_api_lists_pairs_and_revokes(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    await redeem(served, await new_code(served), "phone")
    listed = (await served.get_json("/api/nodes"))["nodes"]
    assert [(n["name"], n["online"], n["caps"]) for n in listed] == [("phone", False, [])]
    async with served.client.delete(served.url + "/api/nodes/phone", headers=served.auth()) as r:
        assert r.status == 200
    async with served.client.delete(served.url + "/api/nodes/phone", headers=served.auth()) as r:
        assert r.status == 404
    # The dashboard's endpoints need the API token; the devices' do not.
    async with served.client.get(served.url + "/api/nodes") as response:
        assert response.status == 401
