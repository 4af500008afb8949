"""The p99.9 tail check fires when one request in a thousand slows down, even while p99 improves."""

from __future__ import annotations

from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.edge.config import TailConfig
from sidecar.checks.edge.tail import TailLatency
from sidecar.clock import FakeClock
from sidecar.processors.edge import EdgeProcessor
from sidecar.processors.edge_config import EdgeSeriesConfig
from sidecar.processors.edge_record import EdgeRecord

T0 = 1_764_892_800.0


def _feed(p: EdgeProcessor, start: float, minutes: int, values: np.ndarray) -> None:
    per = len(values) // minutes
    for m in range(minutes):
        chunk = values[m * per : (m + 1) * per]
        p.observe([EdgeRecord(start + m * 60 + 1, "/p", "HIT", float(v), None, 200, "n1") for v in chunk])


def _setup(**cfg: Any) -> tuple[EdgeProcessor, TailLatency]:
    reg = CollectorRegistry()
    p = EdgeProcessor(EdgeSeriesConfig(), registry=reg, clock=FakeClock(T0))
    return p, TailLatency(TailConfig.model_validate(cfg), series=p, registry=reg)


def test_p999_rising_fires_while_p99_improves() -> None:
    rng = np.random.default_rng(3)
    p, tail = _setup()
    base = rng.uniform(0.02, 0.08, 60_000)  # an hour: p99 ~79 ms, p99.9 ~80 ms
    _feed(p, T0, 60, base)
    now_vals = rng.uniform(0.02, 0.06, 5_000)  # five minutes: most requests faster...
    now_vals[:25] = 1.5  # ...but 0.5% take 1.5 s: p99.9 jumps, p99 does not
    rng.shuffle(now_vals)
    _feed(p, T0 + 3600, 5, now_vals)
    f = tail.evaluate(T0 + 3600 + 300 - 30)[0]
    assert f.active and f.facts["reason"] == "ratio"
    assert f.facts["p99"] < f.facts["base_p99"]
    assert f.facts["p999"] > 10 * f.facts["base_p999"]
    summary, _ = finding_text(f)
    assert summary.startswith("edge p99.9 all ")
    assert "while p99 improved" in summary


def test_a_steady_tail_does_not_fire_and_a_bound_does() -> None:
    rng = np.random.default_rng(5)
    p, tail = _setup(threshold_secs=0.07)
    _feed(p, T0, 65, rng.uniform(0.02, 0.08, 65_000))
    f = tail.evaluate(T0 + 3900 - 30)[0]
    assert f.facts["reason"] == "threshold"  # p99.9 ~80 ms over the 70 ms bound, no ratio
    p2, tail2 = _setup()
    _feed(p2, T0, 65, rng.uniform(0.02, 0.08, 65_000))
    assert not tail2.evaluate(T0 + 3900 - 30)[0].active


def test_few_requests_are_insufficient() -> None:
    p, tail = _setup()
    _feed(p, T0, 5, np.full(50, 0.01))
    f = tail.evaluate(T0 + 300)[0]
    assert f.insufficient_data and not f.active
