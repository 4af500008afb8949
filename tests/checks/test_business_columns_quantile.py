"""A quantile business check fed an ``event_columns`` batch holds what it holds fed the same events one by one:
the same buckets, counts and sketch items (the sketch takes each bucket's values as one array, in event order)."""

from __future__ import annotations

from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from sidecar.checks.business.check import BusinessChecks
from sidecar.checks.business.config import BusinessConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, EventColumns
from sidecar.store import Store

T0 = 1_700_000_000.0
P95 = {
    "model": "ctr",
    "field": "score",
    "aggregate": "quantile",
    "quantile": 0.95,
    "threshold": 0.9,
    "compare": "absolute",
    "direction": "up",
}


def _checks(tmp_path: Any, name: str) -> BusinessChecks:
    cfg = BusinessConfig.model_validate({"enabled": True, "checks": {"p95": P95}})
    return BusinessChecks(cfg, registry=CollectorRegistry(), clock=FakeClock(T0), store=Store(tmp_path / name))


def _buckets(bc: BusinessChecks) -> list[tuple[Any, ...]]:
    out = []
    for skey, s in bc.checks["p95"].series.items():
        for which, buckets in (("cur", s.cur), ("base", s.base)):
            for at, b in sorted(buckets.items()):
                items = sorted(x for x, _ in b.sketch) if b.sketch is not None else None  # type: ignore[attr-defined]
                out.append((skey, which, at, b.count, b.total, items))
    return out


def test_a_quantile_check_takes_columns_as_it_takes_events(tmp_path: Any) -> None:
    rng = np.random.default_rng(3)
    one, cols = _checks(tmp_path, "a.sqlite"), _checks(tmp_path, "b.sqlite")
    for i in range(2):  # 150 values in all: the sketches stay exact (KLL_K = 200), so items compare exactly
        ts = T0 - rng.uniform(0, 7200, size=75)  # two hourly buckets
        score = rng.uniform(size=75)
        score[::7] = np.nan  # no score: a missing field
        block = EventColumns("ctr", str(1 + i), ts, {"x": rng.normal(size=75)}, score)
        one.observe(Batch(kind="events", source="t", items=tuple(block.events())))
        cols.observe_columns(Batch(kind="event_columns", source="t", items=(block,)))
    got = _buckets(cols)
    assert got == _buckets(one)
    assert len(got) >= 2 and all(items for *_, items in got)
