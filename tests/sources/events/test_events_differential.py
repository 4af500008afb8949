"""Events through ``POST /v1/events`` into the drift and business checks, on a fixed seed: the windows, the
pinned references, the business values and the counts in /metrics must stay what the per-event path gave
(``GOLDEN`` was recorded from it). A faster ingest path must leave every one of these unchanged.

The batches mix what the door and the checks treat differently: two models and three versions, numeric,
categorical and integer features, nulls, a model of float features only (some events lacking one or
listing them in another order), a score that is sometimes absent, events too late for the window,
events refused at the door (future time, unknown field, too long a string, a bad trace id), a pinned reference
that fills up in the middle of a batch, and windows that fold into a sketch (whose content is compared by
count, since the sketch's compaction is random).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store

NOW = 1_700_000_000.0
NO_BULK = False  # True to re-record GOLDEN with the bulk path off (batch_observe._plan answering None)
GOLDEN = "db619958b98f6654d75c41ac94ec14bfcbd0c544e30b8d3dde178b2afa81f110"  # recorded from the per-event path


def _config() -> dict[str, Any]:
    return {
        "events": {"max_events_per_batch": 1000},
        "server": {"max_body_bytes": 4_000_000},
        "checks": {
            "drift": {
                "enabled": True,
                "method": "window",
                "window_secs": 1800,
                "bucket_count": 6,
                "max_exact_samples": 600,
                "reference": {"mode": "pinned", "pinned_events": 200},
            },
            "business": {
                "enabled": True,
                "checks": {
                    "score_mean": {
                        "model": "ctr",
                        "field": "score",
                        "aggregate": "mean",
                        "window_secs": 3600,
                        "baseline_secs": 86400,
                        "compare": "relative",
                        "direction": "down",
                        "threshold": 0.15,
                    },
                    "x_mean": {
                        "model": "ctr",
                        "field": "features.x",
                        "aggregate": "mean",
                        "window_secs": 3600,
                        "baseline_secs": 86400,
                        "compare": "relative",
                        "direction": "up",
                        "threshold": 0.5,
                    },
                    "clicks": {
                        "field": "fields.clicked",
                        "aggregate": "rate",
                        "window_secs": 3600,
                        "baseline_secs": 86400,
                        "compare": "relative",
                        "direction": "down",
                        "threshold": 0.5,
                    },
                },
            },
        },
    }


def _event(rnd: random.Random, now: float) -> dict[str, Any]:
    model = "ctr" if rnd.random() < 0.7 else "rank"
    ev: dict[str, Any] = {
        "model": model,
        "version": rnd.choice(["1", "2", 3]),
        "timestamp": now - rnd.uniform(0, 900),
        "features": {
            "x": rnd.gauss(0.0, 1.0),
            "y": None if rnd.random() < 0.1 else rnd.randint(0, 9),
            "c": rnd.choice(["de", "fr", "us", None]),
        },
    }
    if model == "rank":  # numbers only: the bulk path reads them as one matrix, unless one lacks or reorders
        ev["features"] = {"a": rnd.gauss(5.0, 2.0), "b": rnd.expovariate(1.0)}
        if rnd.random() < 0.03:
            del ev["features"]["b"]
        elif rnd.random() < 0.03:
            ev["features"] = {"b": ev["features"]["b"], "a": ev["features"]["a"]}
    if rnd.random() < 0.9:
        ev["score"] = rnd.random()
    if rnd.random() < 0.3:
        ev["fields"] = {"clicked": float(rnd.random() < 0.2)}
    r = rnd.random()
    if r < 0.03:
        ev["timestamp"] = now - 4000  # accepted at the door, too late for the drift window
    elif r < 0.05:
        ev["timestamp"] = now + 1000  # refused: future
    elif r < 0.06:
        ev["feature"] = {"x": 1}  # refused: unknown field
    elif r < 0.07:
        ev["features"]["c"] = "z" * 300  # refused: too long
    elif r < 0.08:
        ev["trace_id"] = "nothex"  # refused
    elif r < 0.1:
        ev["timestamp"] = "2023-11-14T22:00:00Z"  # an RFC 3339 time
    return ev


@pytest.fixture
def service(tmp_path: Any) -> Iterator[tuple[TestClient, Service, FakeClock]]:
    from sidecar.app import create_app
    from sidecar.wiring.business import build as business
    from sidecar.wiring.drift import build as drift
    from sidecar.wiring.events import build as events

    clock = FakeClock(NOW)
    svc = Service(
        parse_config(_config()),
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=[events, drift, business],
    )
    with TestClient(create_app(svc)) as client:
        yield client, svc, clock


def _window_digest(win: Any) -> list[Any]:
    out = []
    for idx, b in sorted(win._buckets.items()):
        sketch_n = None if b.sketch is None else int(b.sketch.n)
        vals = list(b.values) if b.sketch is None else len(b.values)
        out.append([idx, b.total, b.missing, vals, sorted(b.counts.items()), sketch_n])
    return out


def _state(svc: Service, now: float) -> dict[str, Any]:
    from sidecar.checks.business.check import BusinessChecks
    from sidecar.checks.drift.check import DriftCheck

    drift = next(c for c in svc.components if isinstance(c, DriftCheck))
    business = next(c for c in svc.components if isinstance(c, BusinessChecks))
    reg, refs = drift.registry, drift.refs
    findings = business.evaluate(now)
    metrics = [
        line
        for line in generate_latest(svc.registry).decode().splitlines()
        if line.startswith(("sidecar_events_", "sidecar_drift_events", "sidecar_drift_dropped", "sidecar_business_"))
        and "_created" not in line
    ]
    return {
        "windows": [[list(k), _window_digest(w)] for k, w in sorted(reg.windows.items())],
        "kinds": sorted([list(k), v] for k, v in reg.kinds.items()),
        "pinned": sorted([list(k), p.events, p.target] for k, p in refs.pinned.items()),
        "refs": sorted([list(k), r.to_bytes().hex()] for k, r in refs.refs.items()),
        "business": sorted(
            [f.check, sorted(f.labels.items()), f.value, f.baseline, f.active, f.insufficient_data] for f in findings
        ),
        "metrics": sorted(metrics),
    }


def test_checks_state_after_fixed_seed_batches_is_unchanged(
    service: tuple[TestClient, Service, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sidecar.checks.drift.check as drift_check

    client, svc, clock = service
    bulk = [0, 0]  # events offered to the drift check's bulk path, events it handed back

    def spy(reg: Any, refs: Any, spec_for: Any, items: Any, now: float, *rest_args: Any) -> Any:
        rest = real(reg, refs, spec_for, items, now, *rest_args)
        bulk[0] += len(items)
        bulk[1] += len(rest)
        return rest

    real = drift_check.observe_batch
    monkeypatch.setattr(drift_check, "observe_batch", spy)
    rnd = random.Random(31)
    sent = accepted = rejected = 0
    for i in range(16):
        events = [_event(rnd, clock.now()) for _ in range(rnd.randint(150, 400))]
        if i % 2:
            body = b"\n".join(orjson.dumps(e) for e in events)
            headers = {"content-type": "application/x-ndjson"}
        else:
            body = orjson.dumps({"events": events})
            headers = {"content-type": "application/json"}
        r = client.post("/v1/events", content=body, headers=headers)
        assert r.status_code == 200, r.text
        doc = r.json()
        sent += len(events)
        accepted += doc["accepted"]
        rejected += doc["rejected_count"]
        assert [x["index"] for x in doc["rejected"]] == sorted(x["index"] for x in doc["rejected"])
        clock.advance(120)
    assert sent == accepted + rejected
    assert svc.registry.get_sample_value("sidecar_events_received_total", {"source": "http"}) == accepted
    assert svc.registry.get_sample_value("sidecar_events_rejected_total", {"source": "http", "reason": "invalid"}) == (
        rejected
    )
    state = _state(svc, clock.now())
    assert any(p[1] >= p[2] for p in state["pinned"]) or state["refs"], "a pinned reference must have filled"
    assert any(b[5] for w in state["windows"] for b in w[1]), "some bucket must have folded into a sketch"
    assert NO_BULK or bulk[0] - bulk[1] > accepted // 3, f"the bulk path took too little to test it: {bulk}"
    assert bulk[1] > 300, f"one by one took too little to test it: {bulk}"
    digest = hashlib.sha256(orjson.dumps(state)).hexdigest()
    assert digest == GOLDEN, digest + " " + orjson.dumps(state, option=orjson.OPT_INDENT_2).decode()[:4000]


def _plain_event(rnd: random.Random, now: float, i: int, one_model: bool = False) -> dict[str, Any]:
    """An event of the common shape (numbers only, the same names per model): the columnar door takes it."""
    model = "ctr" if one_model or rnd.random() < 0.7 else "rank"
    feats = {"x": rnd.gauss(0.0, 1.0), "y": rnd.randint(0, 9)} if model == "ctr" else {"a": rnd.gauss(5.0, 2.0)}
    ev: dict[str, Any] = {"model": model, "version": rnd.choice(["1", 2]) if i % 3 else "1", "features": feats}
    r = rnd.random()
    ev["timestamp"] = now - 4000 if r < 0.03 else now + 200 if r < 0.05 else now - rnd.uniform(0, 900)
    if i % 4 != 3:  # some batches carry no score at all, others a null now and then
        ev["score"] = None if rnd.random() < 0.05 else rnd.random()
    return ev


def _run_plain_batches(
    tmp_path: Any, columns: bool, monkeypatch: pytest.MonkeyPatch, one_model: bool = False
) -> tuple[dict[str, Any], int]:
    from sidecar.app import create_app
    from sidecar.sources.events import http
    from sidecar.wiring.business import build as business
    from sidecar.wiring.drift import build as drift
    from sidecar.wiring.events import build as events

    taken = [0]
    real, real_typed = http.parse_columns, http.TypedDoor.body

    def spy(docs: Any, cfg: Any, now: float) -> Any:
        got = real(docs, cfg, now) if columns else None
        taken[0] += 0 if got is None else sum(b.n for b in got)
        return got

    def typed_spy(door: Any, body: bytes, json_lines: bool, now: float) -> Any:
        got = real_typed(door, body, json_lines, now) if columns else None
        taken[0] += 0 if got is None else sum(b.n for b in got)
        return got

    monkeypatch.setattr(http, "parse_columns", spy)
    monkeypatch.setattr(http.TypedDoor, "body", typed_spy)
    clock = FakeClock(NOW)
    svc = Service(
        parse_config(_config()),
        clock=clock,
        registry=CollectorRegistry(),
        store=Store(tmp_path / f"{columns}.sqlite"),
        factories=[events, drift, business],
    )
    rnd = random.Random(311)
    sent = 0
    with TestClient(create_app(svc)) as client:
        for i in range(14):
            evs = [_plain_event(rnd, clock.now(), i, one_model) for _ in range(rnd.randint(100, 400))]
            if i % 2:
                body, ctype = b"\n".join(orjson.dumps(e) for e in evs), "application/x-ndjson"
            else:
                body, ctype = orjson.dumps({"events": evs}), "application/json"
            r = client.post("/v1/events", content=body, headers={"content-type": ctype})
            assert r.status_code == 200 and r.json()["accepted"] == len(evs), r.text
            sent += len(evs)
            clock.advance(150)
        assert svc.registry.get_sample_value("sidecar_events_received_total", {"source": "http"}) == sent
        state = _state(svc, clock.now())
    return state, taken[0]


def test_the_columnar_path_leaves_the_same_state_as_the_per_event_path(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of the common shape (two models, two versions mixed in one batch, integer features, late and
    slightly future events, null and absent scores, a pinned reference filling mid-run, buckets folding into
    sketches) through the app twice: as columns, and with the columnar door off (every event one by one).
    Drift windows, kinds, references, business values and every events, drift and business counter agree."""
    ours, taken = _run_plain_batches(tmp_path, True, monkeypatch)
    per_event, none = _run_plain_batches(tmp_path, False, monkeypatch)
    assert none == 0 and taken > 3000, taken  # the columnar door took the batches, so the comparison means something
    assert any(b[5] for w in ours["windows"] for b in w[1]), "some bucket must have folded into a sketch"
    assert ours["refs"], "a pinned reference must have filled"
    assert any(f[2] is not None for f in ours["business"])
    assert ours == per_event


def test_the_typed_door_leaves_the_same_state_as_the_per_event_path(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with one model, so every batch after the first has the learned feature names and is decoded
    by the typed door (typed.py): the same state as one by one."""
    from sidecar.sources.events.typed import TypedDoor

    typed = [0]
    real = TypedDoor._columns

    def count(door: Any, *args: Any) -> Any:
        got = real(door, *args)
        typed[0] += 0 if got is None else sum(b.n for b in got)
        return got

    monkeypatch.setattr(TypedDoor, "_columns", count)
    ours, taken = _run_plain_batches(tmp_path, True, monkeypatch, one_model=True)
    per_event, none = _run_plain_batches(tmp_path, False, monkeypatch, one_model=True)
    assert none == 0 and typed[0] > 3000 and taken - typed[0] < 400, (taken, typed)
    assert any(b[5] for w in ours["windows"] for b in w[1]), "some bucket must have folded into a sketch"
    assert ours["refs"], "a pinned reference must have filled"
    assert ours == per_event
