"""Properties of POST /v1/changes over generated bodies (hypothesis): any body is stored whole or refused with
a 4xx and nothing stored; a stored time is always renderable; posting the same body again is answered with the
same ids and stores nothing more."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
from drift_testutil import make_ctx
from fastapi import HTTPException, Request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.clock import FakeClock
from sidecar.sources.changes_http import ChangesEndpoint
from sidecar.state.changes import ChangeLog
from sidecar.state.changes_config import ChangesConfig
from sidecar.timerange import renderable

NOW = 1_700_000_000.0
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars, lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=8), k, max_size=3), max_leaves=8
)
change_like = st.fixed_dictionaries(
    {"what": st.text(max_size=30) | values},
    optional={
        "who": st.text(max_size=10) | values,
        "model": st.sampled_from(["rec", "fraud"]) | values,
        "at": st.floats(allow_nan=True, allow_infinity=True)
        | st.floats(min_value=NOW - 1e6, max_value=NOW + 1e6)
        | st.integers(min_value=-(2**70), max_value=2**70),
        "id": st.text(max_size=8) | values,
        "link": values,
        "version": values,
    },
)
bodies = st.binary(max_size=200) | (change_like | st.lists(change_like, max_size=5) | values).map(
    lambda v: json.dumps(v).encode()
)


def _setup(tmp: Path) -> tuple[ChangesEndpoint, ChangeLog]:
    ctx = make_ctx(":memory:", FakeClock(NOW), {"alerting": {"enabled": True}})
    log = ChangeLog(ChangesConfig(), registry=ctx.registry, clock=ctx.clock, store=ctx.store)
    ctx.bus.subscribe("changes", log.name, log.on_changes)
    endpoint = ChangesEndpoint(
        ChangesConfig(), lookup=log, bus=ctx.bus, guard=ctx.guard, registry=ctx.registry, clock=ctx.clock
    )
    return endpoint, log


def _post(endpoint: ChangesEndpoint, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    hdrs = [(b"content-type", b"application/json")] + [
        (k.lower().encode(), v.encode()) for k, v in (headers or {}).items()
    ]
    req = Request(
        {"type": "http", "method": "POST", "path": "/v1/changes", "headers": hdrs, "query_string": b""}, receive
    )
    try:
        resp = asyncio.run(endpoint.handle(req))
    except HTTPException as exc:
        return exc.status_code, exc.detail
    return resp.status_code, orjson.loads(bytes(resp.body))


def _stored(log: ChangeLog) -> list[tuple[Any, ...]]:
    return log.store.query("SELECT id, at FROM alerting_changes ORDER BY id")


@SETTINGS
@given(bodies)
def test_any_body_is_stored_whole_or_refused_with_a_4xx_and_nothing_stored(tmp_path: Path, body: bytes) -> None:
    endpoint, log = _setup(tmp_path)
    status, answer = _post(endpoint, body)
    rows = _stored(log)
    if status in (400, 413, 422):
        assert isinstance(answer, str) and answer and rows == []
        return
    assert status == (201 if answer["ids"] else 200), (status, answer)  # 200: nothing new ([] posted)
    assert set(answer["ids"]) == {r[0] for r in rows}
    assert all(renderable(r[1]) for r in rows)
    again_status, again = _post(endpoint, body)  # the client's retry
    assert (again_status, again) == (200, answer) and _stored(log) == rows


@SETTINGS
@given(
    st.lists(
        st.fixed_dictionaries(
            {"what": st.text(min_size=1, max_size=30)},
            optional={"who": st.text(max_size=10), "at": st.floats(min_value=NOW - 1e6, max_value=NOW)},
        ),
        min_size=1,
        max_size=6,
    ),
    st.none() | st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40),
)
def test_a_retry_with_or_without_a_key_gets_the_same_ids(
    tmp_path: Path, items: list[dict[str, Any]], key: str | None
) -> None:
    endpoint, log = _setup(tmp_path)
    headers = {"Idempotency-Key": key} if key else {}
    status, answer = _post(endpoint, orjson.dumps(items), headers)
    assert status == 201, answer
    rows = _stored(log)
    endpoint.clock.advance(30)  # type: ignore[attr-defined]
    assert _post(endpoint, orjson.dumps(items), headers) == (200, answer) and _stored(log) == rows
