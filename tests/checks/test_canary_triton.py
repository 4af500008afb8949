"""The canary verdict from Triton's own counters and summaries, on synthetic scrapes and a fake clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.canary.check import CanaryCheck
from sidecar.checks.canary.config import CanaryConfig
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Finding, SeriesSnapshot
from sidecar.promtext import parse_exposition
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.canary import build as canary_build
from sidecar.wiring.triton import build as triton_build

SOURCE = "triton_metrics"


@dataclass
class _Counters:
    success: float = 0.0
    failure: float = 0.0
    us: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("request", "queue", "infer"), 0.0))
    p50: float | None = None
    p99: float | None = None


class FakeTriton:
    """Cumulative per-version counters as Triton exports them; ``restart`` starts them again from zero."""

    def __init__(self, model: str = "ctr", versions: tuple[str, ...] = ("1", "2")) -> None:
        self.model = model
        self.c = {v: _Counters() for v in versions}

    def serve(
        self,
        version: str,
        n: int,
        mean_ms: float,
        *,
        failed: int = 0,
        p50_ms: float | None = None,
        p99_ms: float | None = None,
    ) -> None:
        c = self.c[version]
        c.success += n
        c.failure += failed
        c.us["request"] += n * mean_ms * 1000
        c.us["queue"] += n * mean_ms * 100  # a tenth queued, the rest computing
        c.us["infer"] += n * mean_ms * 900
        c.p50, c.p99 = p50_ms, p99_ms

    def restart(self) -> None:
        self.c = {v: _Counters() for v in self.c}

    def text(self) -> str:
        lines = []
        for v, c in self.c.items():
            lab = f'model="{self.model}",version="{v}"'
            lines += [
                f"nv_inference_request_success{{{lab}}} {c.success:.0f}",
                f"nv_inference_count{{{lab}}} {c.success:.0f}",
                f'nv_inference_request_failure{{{lab},reason="BACKEND"}} {c.failure:.0f}',
                f'nv_inference_request_failure{{{lab},reason="OTHER"}} 0',
                f"nv_inference_request_duration_us{{{lab}}} {c.us['request']:.0f}",
                f"nv_inference_queue_duration_us{{{lab}}} {c.us['queue']:.0f}",
                f"nv_inference_compute_input_duration_us{{{lab}}} 0",
                f"nv_inference_compute_infer_duration_us{{{lab}}} {c.us['infer']:.0f}",
                f"nv_inference_compute_output_duration_us{{{lab}}} 0",
            ]
            for q, val in (("0.5", c.p50), ("0.99", c.p99)):
                if val is not None:
                    lines.append(f'nv_inference_request_summary_us{{{lab},quantile="{q}"}} {val * 1000:.0f}')
        return "\n".join(lines) + "\n"

    def scrape(self, clock: FakeClock, source: str = SOURCE) -> Batch:
        expo = parse_exposition(self.text())
        samples = tuple(expo.samples)
        snap = SeriesSnapshot(
            target="http://t/metrics",
            samples=samples,
            parsed=MappingProxyType({r: expo.labels(r) for _n, r, _v in samples}),
            types=MappingProxyType({}),
            taken_at=clock.monotonic(),
        )
        return Batch("scrapes", source, (snap,), received_at=clock.now(), complete=True)


def make(clock: FakeClock, **cfg: Any) -> tuple[CanaryCheck, CollectorRegistry]:
    reg = CollectorRegistry()
    conf = CanaryConfig.model_validate({"enabled": True, **cfg})
    return CanaryCheck(conf, registry=reg, clock=clock, triton_source=SOURCE), reg


def verdict(reg: CollectorRegistry, aspect: str) -> float | None:
    return reg.get_sample_value(
        "sidecar_canary_verdict", {"model": "ctr", "baseline": "1", "candidate": "2", "aspect": aspect}
    )


def only(found: Any) -> Finding:
    (f,) = list(found)
    return f


rng = np.random.default_rng(11)


def run(
    chk: CanaryCheck,
    clock: FakeClock,
    triton: FakeTriton,
    intervals: int,
    *,
    every: float = 15.0,
    n: int = 40,
    v1_ms: float = 35.0,
    v2_ms: float = 35.0,
    **kw: Any,
) -> None:
    """Scrape once, then ``intervals`` times after ``n`` requests per version (latency jittered per interval)."""
    chk.observe(triton.scrape(clock))
    for _ in range(intervals):
        clock.advance(every)
        load = rng.normal(1.0, 0.05)  # both versions slower or faster together, as under shared load
        triton.serve("1", n, v1_ms * load * rng.normal(1, 0.02), **kw.get("v1", {}))
        triton.serve("2", n, v2_ms * load * rng.normal(1, 0.02), **kw.get("v2", {}))
        chk.observe(triton.scrape(clock))


def test_a_slower_v2_on_tritons_counters_is_worse_on_mean_latency_and_the_alert_names_the_source(
    clock: FakeClock,
) -> None:
    chk, reg = make(clock)
    run(chk, clock, FakeTriton(), 15, v1_ms=35.0, v2_ms=41.0)
    f = only(chk.evaluate(clock.now()))
    assert f.active and f.facts["worse"] == "latency_triton"
    assert f.facts["latency_triton.n_base"] == 600 and f.facts["latency_triton.intervals"] == 15
    assert f.facts["latency_triton.base"] == pytest.approx(35, rel=0.05)
    assert f.facts["latency_triton.cand"] == pytest.approx(41, rel=0.05)
    assert f.facts["latency_triton.queue_cand"] == pytest.approx(4.1, rel=0.05)  # the queue/compute split
    assert f.facts["latency_triton.compute_cand"] == pytest.approx(36.9, rel=0.05)
    assert f.facts["latency_triton.q"] < 0.001  # type: ignore[operator]  # 15 of 15 pairs slower: 2^-15
    assert verdict(reg, "latency_triton") == 1 and verdict(reg, "errors_triton") == 0
    assert verdict(reg, "p99_triton") is None  # summaries off: not decided
    summary, description = finding_text(f)
    assert summary.startswith("ctr v2 worse on mean latency by 1")
    assert "Triton counters, n=600/600 over 15 intervals)" in summary
    assert summary.endswith("consider reverting to version 1")
    assert "mean latency (Triton counters): v2 " in description and "queue " in description
    assert "Latency from Triton's metrics, over the last " in description  # no events or spans here
    assert (
        reg.get_sample_value("sidecar_canary_samples", {"model": "ctr", "version": "2", "signal": "triton_intervals"})
        == 15
    )


def test_the_same_latency_on_tritons_counters_is_healthy(clock: FakeClock) -> None:
    chk, reg = make(clock)
    run(chk, clock, FakeTriton(), 15)
    f = only(chk.evaluate(clock.now()))
    assert not f.active and f.facts["verdict"] == "healthy"
    assert verdict(reg, "latency_triton") == 0 and verdict(reg, "errors_triton") == 0
    assert "mean latency " in finding_text(f)[0]


def test_fewer_intervals_than_min_intervals_are_not_decided(clock: FakeClock) -> None:
    chk, reg = make(clock, min_intervals=10)
    run(chk, clock, FakeTriton(), 9, n=200, v1_ms=35.0, v2_ms=80.0)  # 1800 requests each, but 9 intervals
    f = only(chk.evaluate(clock.now()))
    assert f.facts["latency_triton.q"] is None and verdict(reg, "latency_triton") is None
    assert verdict(reg, "errors_triton") == 0  # counts: decided from the requests alone


def test_a_higher_failure_ratio_on_tritons_counters_is_worse_in_points(clock: FakeClock) -> None:
    chk, reg = make(clock)
    run(chk, clock, FakeTriton(), 12, n=90, v1={"failed": 1}, v2={"failed": 10})
    f = only(chk.evaluate(clock.now()))
    assert f.active and f.facts["worse"] == "errors_triton" and verdict(reg, "errors_triton") == 1
    assert f.facts["errors_triton.n_cand"] == 12 * 100
    assert (
        "worse on errors by 8.9 points (v2 10.0% vs v1 1.1%, Triton counters, n=1200/1092 over 12 intervals)"
        in finding_text(f)[0]
    )


def test_tritons_summaries_give_p50_and_p99_from_readings_one_summary_window_apart(clock: FakeClock) -> None:
    chk, reg = make(clock, window_secs=1200)
    # Scrapes every 15 s for 18 minutes, 150 requests per version each: 600 behind every 60 s summary window.
    run(chk, clock, FakeTriton(), 72, n=150, v1={"p50_ms": 30.0, "p99_ms": 35.0}, v2={"p50_ms": 32.0, "p99_ms": 41.0})
    f = only(chk.evaluate(clock.now()))
    assert f.facts["worse"] == "p99_triton"  # p50 is 7% slower: sure, but under the 10% floor
    # 72 scrapes, 15 s apart: a reading every 4th (60 s), the first once 500 requests are behind it.
    assert f.facts["p99_triton.intervals"] == 18 and f.facts["p99_triton.n_cand"] == 18 * 600
    assert f.facts["p99_triton.base"] == 35 and f.facts["p99_triton.cand"] == 41
    assert (
        "worse on p99 by 17% (v2 41 ms vs v1 35 ms, Triton summaries, n=10800/10800 over 18 readings)"
        in finding_text(f)[0]
    )
    assert verdict(reg, "p50_triton") == 0 and f.facts["p50_triton.intervals"] == 18


def test_summary_readings_with_too_few_requests_behind_them_leave_p99_undecided(clock: FakeClock) -> None:
    chk, reg = make(clock, window_secs=1200)
    run(
        chk, clock, FakeTriton(), 72, n=30, v1={"p50_ms": 30.0, "p99_ms": 35.0}, v2={"p50_ms": 40.0, "p99_ms": 90.0}
    )  # 120 requests a minute: a p99 of them is one or two values
    f = only(chk.evaluate(clock.now()))
    assert verdict(reg, "p99_triton") is None and f.facts["p99_triton.intervals"] == 0
    assert verdict(reg, "p50_triton") == 1  # 10 requests suffice behind a median


def test_a_triton_restart_produces_no_verdict_and_its_interval_is_dropped_and_counted(clock: FakeClock) -> None:
    chk, reg = make(clock)
    triton = FakeTriton()
    run(chk, clock, triton, 8, n=1000, v1={"failed": 10}, v2={"failed": 10})
    triton.restart()
    clock.advance(15)
    # The first requests after the restart are slow and fail (v2 still loading: 300 refused), and all counters
    # are far below where they were: read as plain differences they would be negative.
    triton.serve("1", 5, 300.0, failed=1)
    triton.serve("2", 5, 900.0, failed=300)
    chk.observe(triton.scrape(clock))
    for _ in range(8):
        clock.advance(15)
        triton.serve("1", 1000, 35.0 * rng.normal(1, 0.02), failed=10)
        triton.serve("2", 1000, 35.0 * rng.normal(1, 0.02), failed=10)
        chk.observe(triton.scrape(clock))
    f = only(chk.evaluate(clock.now()))
    assert f.facts["worse"] == "" and not f.active
    assert verdict(reg, "latency_triton") == 0 and verdict(reg, "errors_triton") == 0
    assert reg.get_sample_value("sidecar_canary_values_dropped_total", {"reason": "counter_reset"}) == 2
    assert f.facts["errors_triton.n_cand"] == 16 * 1010  # every interval but the restart's
    assert f.facts["latency_triton.intervals"] == 16


def test_a_failed_scrape_is_bridged_by_the_next_good_one(clock: FakeClock) -> None:
    chk, _ = make(clock)
    triton = FakeTriton()
    run(chk, clock, triton, 10, v1_ms=35.0, v2_ms=41.0)
    clock.advance(15)
    triton.serve("1", 40, 35.0)
    triton.serve("2", 40, 41.0)
    chk.observe(Batch("scrapes", SOURCE, (), received_at=clock.now(), complete=True))  # the scrape failed
    clock.advance(15)
    chk.observe(triton.scrape(clock))
    f = only(chk.evaluate(clock.now()))
    assert f.facts["latency_triton.intervals"] == 11 and f.facts["latency_triton.n_cand"] == 440


def test_other_sources_samples_are_ignored_and_intervals_are_bounded(clock: FakeClock) -> None:
    chk, reg = make(clock, max_samples=100, window_secs=86400)
    triton = FakeTriton()
    triton.serve("1", 10, 5.0)
    chk.observe(triton.scrape(clock, source="nvml"))
    clock.advance(15)
    triton.serve("1", 10, 5.0)
    chk.observe(triton.scrape(clock, source="nvml"))
    assert chk.models == {}
    run(chk, clock, triton, 150, n=5)
    chk.evaluate(clock.now())
    assert (
        reg.get_sample_value("sidecar_canary_samples", {"model": "ctr", "version": "1", "signal": "triton_intervals"})
        == 100
    )


def test_versions_beyond_the_cap_from_tritons_scrape_are_dropped_and_counted(clock: FakeClock) -> None:
    chk, reg = make(clock, max_models=2, max_versions_per_model=2)
    triton = FakeTriton(versions=("1", "2", "3"))
    chk.observe(triton.scrape(clock))
    for _ in range(2):
        clock.advance(15)
        for v in ("1", "2", "3"):
            triton.serve(v, 10, 5.0)
        chk.observe(triton.scrape(clock))
    assert set(chk.models["ctr"]) == {"1", "2"}
    assert reg.get_sample_value("sidecar_canary_values_dropped_total", {"reason": "version_limit"}) == 2


@pytest.mark.parametrize(
    ("triton", "canary_triton", "subscribed"), [(True, True, True), (True, False, False), (False, True, False)]
)
def test_the_wiring_subscribes_the_canary_to_tritons_scrape_only_when_both_are_on(
    tmp_path: Path, triton: bool, canary_triton: bool, subscribed: bool
) -> None:
    cfg = parse_config(
        {"triton": {"enabled": triton}, "checks": {"canary": {"enabled": True, "triton": canary_triton}}}
    )
    svc = Service(
        cfg,
        clock=FakeClock(),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=[triton_build, canary_build],
    )
    assert ("canary" in svc.bus.subscribers("scrapes")) is subscribed
    assert (svc.component("canary").triton is not None) is subscribed


def test_triton_intervals_leave_with_the_window_and_a_version_without_traffic_is_forgotten(clock: FakeClock) -> None:
    chk, reg = make(clock, window_secs=600)
    triton = FakeTriton()
    run(chk, clock, triton, 20, every=60.0)  # 20 minutes of both versions
    chk.evaluate(clock.now())
    v1 = chk.models["ctr"]["1"]
    assert v1.triton is not None and len(v1.triton) == 11  # the intervals ended in the last 600 s, bounds included
    for _ in range(11):  # then v2 gets no traffic: Triton still exports it, with no increase
        clock.advance(60)
        triton.serve("1", 40, 35.0)
        chk.observe(triton.scrape(clock))
    assert list(chk.evaluate(clock.now())) == [] and set(chk.models["ctr"]) == {"1"}
    assert (
        reg.get_sample_value("sidecar_canary_samples", {"model": "ctr", "version": "2", "signal": "triton_intervals"})
        is None
    )
