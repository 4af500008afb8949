"""The cold-start watch on recorded model-API polls (a version loading, its first requests, steady traffic)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.render import finding_text
from sidecar.checks.batching.check import BatchingAdvisor
from sidecar.checks.cold_start.check import ColdStartWatch
from sidecar.checks.cold_start.config import ColdStartConfig
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Sample
from sidecar.service import Service
from sidecar.sources.triton_model_api import SOURCE as MODEL_API
from sidecar.store import Store
from sidecar.wiring.verdicts import build


def poll(states: dict[tuple[str, str], str], stats: dict[tuple[str, str], tuple[float, float]], at: float) -> Batch:
    items = [
        Sample("triton_model_state", (("model", m), ("state", s), ("version", v)), 1.0) for (m, v), s in states.items()
    ]
    for (m, v), (count, ns) in stats.items():
        items.append(Sample("triton_model_stats", (("model", m), ("stat", "success_count"), ("version", v)), count))
        items.append(Sample("triton_model_stats", (("model", m), ("stat", "success_ns"), ("version", v)), ns))
    return Batch(kind="samples", source="triton_model_api", items=tuple(items), received_at=at, complete=True)


def watch(**cfg: object) -> tuple[ColdStartWatch, CollectorRegistry]:
    reg = CollectorRegistry()
    return ColdStartWatch(ColdStartConfig.model_validate({"enabled": True, **cfg}), registry=reg), reg


def test_a_load_longer_than_the_bound_is_a_finding_while_loading_and_after(clock: FakeClock) -> None:
    w, reg = watch(max_load_secs=30)
    t0 = clock.now()
    w.observe(poll({("ctr", "1"): "READY"}, {}, t0))
    w.observe(poll({("ctr", "1"): "READY", ("ctr", "2"): "LOADING"}, {}, t0 + 2))
    (f,) = [f for f in w.evaluate(t0 + 20) if f.check == "cold_start_load"]
    assert not f.active and f.value == 18
    (f,) = [f for f in w.evaluate(t0 + 40) if f.check == "cold_start_load"]
    assert f.active and f.facts["phase"] == "loading"
    assert finding_text(f)[0] == "ctr v2 still loading after 38s (bound 30s)"
    w.observe(poll({("ctr", "1"): "READY", ("ctr", "2"): "READY"}, {}, t0 + 47))
    (f,) = [f for f in w.evaluate(t0 + 50) if f.check == "cold_start_load"]
    assert f.active and f.value == 45 and f.labels == {"model": "ctr", "version": "2"}
    assert finding_text(f)[0] == "ctr v2 took 45s to load (bound 30s)"
    assert reg.get_sample_value("sidecar_cold_start_load_seconds", {"model": "ctr", "version": "2"}) == 45
    # v1 was already READY when the watch began: no load was timed, nothing is said about it.
    assert all(f.labels["version"] == "2" for f in w.evaluate(t0 + 50))


def test_a_fast_load_is_not_active_and_the_finding_ends_after_the_hold(clock: FakeClock) -> None:
    w, _ = watch(max_load_secs=30, hold_secs=600)
    t0 = clock.now()
    w.observe(poll({}, {}, t0))
    w.observe(poll({("m", "1"): "LOADING"}, {}, t0 + 2))
    w.observe(poll({("m", "1"): "READY"}, {}, t0 + 6))
    (f,) = w.evaluate(t0 + 10)
    assert not f.active and f.value == 4
    assert w.evaluate(t0 + 700) == []


def feed_traffic(w: ColdStartWatch, t0: float, first_ms: float, steady_ms: list[float], n_first: int) -> float:
    """Load m v1, serve ``n_first`` requests at ``first_ms`` each, then 20 requests per poll at ``steady_ms``."""
    w.observe(poll({}, {}, t0))
    w.observe(poll({("m", "1"): "LOADING"}, {}, t0 + 1))
    w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (0, 0)}, t0 + 3))
    count, ns, t = float(n_first), n_first * first_ms * 1e6, t0 + 5
    w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (count, ns)}, t))
    for ms in steady_ms:
        count, ns, t = count + 20, ns + 20 * ms * 1e6, t + 2
        w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (count, ns)}, t))
    return t


def test_first_requests_slower_than_k_times_steady_p99_are_a_finding(clock: FakeClock) -> None:
    w, reg = watch(first_requests=10, slowdown_factor=3)
    t = feed_traffic(w, clock.now(), 300.0, [10, 12, 11, 20, 10], n_first=10)
    (f,) = [f for f in w.evaluate(t) if f.check == "cold_start_first_requests"]
    assert f.active and f.value == 0.3 and f.baseline == 0.02
    assert f.facts["ratio"] == 15.0
    assert finding_text(f)[0] == "m v1 first 10 requests 15.0x slower than steady p99 (300 ms vs 20 ms)"
    ratio = reg.get_sample_value("sidecar_cold_start_first_requests_slowdown_ratio", {"model": "m", "version": "1"})
    assert ratio == 15.0


def test_first_requests_near_steady_are_not_a_finding(clock: FakeClock) -> None:
    w, _ = watch(first_requests=10, slowdown_factor=3)
    t = feed_traffic(w, clock.now(), 25.0, [10, 12, 11, 20, 10], n_first=10)
    (f,) = [f for f in w.evaluate(t) if f.check == "cold_start_first_requests"]
    assert not f.active and f.facts["ratio"] == 1.25


def test_too_little_steady_traffic_is_insufficient_data_not_a_verdict(clock: FakeClock) -> None:
    w, _ = watch(first_requests=10)
    t = feed_traffic(w, clock.now(), 300.0, [10, 10], n_first=10)
    (f,) = [f for f in w.evaluate(t) if f.check == "cold_start_first_requests"]
    assert f.insufficient_data and not f.active
    assert "not enough steady traffic" in finding_text(f)[0]


def test_a_version_serving_when_the_watch_began_gets_no_first_request_verdict(clock: FakeClock) -> None:
    w, _ = watch(first_requests=10)
    t0 = clock.now()
    w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (5000, 5000 * 300e6)}, t0))
    for i in range(1, 6):
        w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (5000 + 20 * i, 5000 * 300e6 + 20 * i * 1e7)}, t0 + i))
    assert w.evaluate(t0 + 6) == []


def test_a_reload_starts_over_and_an_unloaded_version_is_forgotten(clock: FakeClock) -> None:
    w, reg = watch(first_requests=10)
    t = feed_traffic(w, clock.now(), 300.0, [10, 12, 11, 20], n_first=10)
    w.observe(poll({("m", "1"): "LOADING"}, {("m", "1"): (0, 0)}, t + 2))
    assert [f.check for f in w.evaluate(t + 3)] == ["cold_start_load"]
    w.observe(poll({}, {}, t + 4))
    assert w.evaluate(t + 5) == [] and w.versions == {}
    assert reg.get_sample_value("sidecar_cold_start_load_seconds", {"model": "m", "version": "1"}) is None


def test_the_wiring_gives_the_watch_and_the_advisor_the_model_apis_polls_only(tmp_path: Path) -> None:
    cfg = parse_config(
        {
            "triton": {"http_url": "http://triton:8000"},
            "checks": {"cold_start": {"enabled": True}, "batching": {"enabled": True}},
        }
    )
    svc = Service(
        cfg, clock=FakeClock(), registry=CollectorRegistry(), store=Store(tmp_path / "s.sqlite"), factories=[build]
    )
    cold, advisor = svc.component("cold_start"), svc.component("batching")
    assert isinstance(cold, ColdStartWatch) and isinstance(advisor, BatchingAdvisor)
    items = (
        Sample("triton_model_state", (("model", "m"), ("state", "LOADING"), ("version", "1")), 1.0),
        Sample("triton_model_stats", (("model", "m"), ("stat", "inference_count"), ("version", "1")), 3.0),
        Sample("triton_model_config", (("field", "max_batch_size"), ("model", "m")), 8.0),
    )
    assert svc.bus.publish(Batch(kind="samples", source="other", items=items, complete=True)) == []
    assert cold.versions == {} and advisor.configs == {} and advisor.series == {}
    assert svc.bus.publish(Batch(kind="samples", source=MODEL_API, items=items, complete=True)) == []
    assert set(cold.versions) == {("m", "1")} and set(advisor.series) == {("m", "1")}
    assert advisor.configs == {"m": {"max_batch_size": 8.0}}


def test_a_load_that_held_the_index_request_is_timed_from_below(clock: FakeClock) -> None:
    w, _ = watch(max_load_secs=3)
    t0 = clock.now()
    w.observe(poll({}, {}, t0))
    held = poll({("m", "1"): "READY"}, {}, t0 + 7)
    w.observe(
        Batch(
            kind="samples",
            source="triton_model_api",
            received_at=t0 + 7,
            complete=True,
            items=(Sample("triton_model_index_seconds", (), 4.8), *held.items),
        )
    )
    (f,) = w.evaluate(t0 + 8)
    assert f.active and f.value == pytest.approx(4.8) and f.facts["lower_bound"] == "yes"
    assert finding_text(f)[0] == "m v1 took at least 5s to load (bound 3s)"
    assert "held the sidecar's repository-index request for the whole load" in finding_text(f)[1]


def test_a_quick_index_answer_times_nothing_and_an_unloaded_version_says_nothing(clock: FakeClock) -> None:
    w, _ = watch(max_load_secs=3)
    t0 = clock.now()
    w.observe(poll({}, {}, t0))
    fast = poll({("m", "1"): "READY"}, {}, t0 + 2)
    w.observe(
        Batch(
            kind="samples",
            source="triton_model_api",
            received_at=t0 + 2,
            complete=True,
            items=(Sample("triton_model_index_seconds", (), 0.01), *fast.items),
        )
    )
    assert w.evaluate(t0 + 3) == []
    w.observe(poll({("m", "2"): "LOADING"}, {}, t0 + 4))
    w.observe(poll({("m", "2"): "READY"}, {}, t0 + 10))
    assert [f.active for f in w.evaluate(t0 + 11)] == [True]
    w.observe(poll({("m", "2"): "UNAVAILABLE"}, {}, t0 + 12))
    assert w.evaluate(t0 + 13) == []


def test_first_requests_hours_after_the_load_are_still_judged_and_held_from_then(clock: FakeClock) -> None:
    w, _ = watch(first_requests=10, hold_secs=600)
    t0 = clock.now()
    w.observe(poll({}, {}, t0))
    w.observe(poll({("m", "1"): "LOADING"}, {}, t0 + 1))
    w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (0, 0)}, t0 + 3))
    t = t0 + 7200  # traffic reaches the new version two hours later
    count, ns = 10.0, 10 * 300e6
    w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (count, ns)}, t))
    for _ in range(4):
        count, ns, t = count + 20, ns + 20 * 10e6, t + 2
        w.observe(poll({("m", "1"): "READY"}, {("m", "1"): (count, ns)}, t))
    (f,) = w.evaluate(t)
    assert f.check == "cold_start_first_requests" and f.active
    assert w.evaluate(t0 + 7200 + 601) == []


def test_a_reload_seen_only_as_unavailable_then_ready_is_not_timed_from_the_old_load(clock: FakeClock) -> None:
    w, _ = watch(max_load_secs=30)
    t0 = clock.now()
    w.observe(poll({}, {}, t0))
    w.observe(poll({("m", "1"): "LOADING"}, {}, t0 + 1))
    w.observe(poll({("m", "1"): "READY"}, {}, t0 + 3))
    w.observe(poll({("m", "1"): "UNAVAILABLE"}, {}, t0 + 100))
    w.observe(poll({("m", "1"): "READY"}, {}, t0 + 102))  # loaded again within one poll interval
    assert w.evaluate(t0 + 103) == []  # not "took 101s to load"
