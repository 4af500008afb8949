"""Business findings name the version they are about: per version when the check groups by it, otherwise
``all`` versions (labels and text); a linked trace is one of this series' requests that made the value bad."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sidecar.alerting.book import AlertBook
from sidecar.alerting.config import AlertingConfig
from sidecar.checks.business.check import BusinessChecks
from sidecar.checks.business.config import BusinessConfig
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event, Finding
from sidecar.store import Store

T0 = 1_700_000_000.0
CHECK: dict[str, Any] = {
    "display_name": "CTR mean",
    "model": "ctr",
    "field": "score",
    "aggregate": "mean",
    "window_secs": 60,
    "bucket_secs": 10,
    "baseline_secs": 600,
    "baseline_bucket_secs": 60,
    "compare": "relative",
    "direction": "down",
    "threshold": 0.15,
    "min_events": 5,
    "min_baseline_events": 10,
    "severity": "high",
}


def _checks(tmp_path: Path, clock: FakeClock, **over: Any) -> BusinessChecks:
    cfg = BusinessConfig.model_validate({"enabled": True, "checks": {"ctr_mean_down": {**CHECK, **over}}})
    return BusinessChecks(cfg, registry=CollectorRegistry(), clock=clock, store=Store(tmp_path / "s.sqlite"))


def _ev(clock: FakeClock, version: str, score: float, trace: str | None = None) -> Event:
    return Event(model="ctr", version=version, timestamp=clock.now(), score=score, trace_id=trace)


def _run(bc: BusinessChecks, clock: FakeClock, secs: int, events: Any) -> list[Finding]:
    """Every 10 s: the events ``events(t)`` makes, then an evaluation; returns the last round's findings."""
    out: list[Finding] = []
    for _ in range(secs // 10):
        clock.advance(10)
        bc.observe(Batch(kind="events", source="t", items=tuple(events(clock.now()))))
        out = list(bc.evaluate(clock.now()))
    return out


def _book() -> AlertBook:
    return AlertBook(
        AlertingConfig.model_validate({"enabled": True}),
        registry=CollectorRegistry(),
        eval_interval_secs=10,
        sink=None,
        runbook_base="http://rb",
        dashboard_base=None,
        sidecar_url="http://sidecar",
    )


def test_a_check_over_every_version_says_all_versions_and_never_names_one(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    bc = _checks(tmp_path, clock)
    # Traffic split between v1 and v2, the newer one regressing: the value is of both versions together.
    _run(bc, clock, 600, lambda t: [_ev(clock, v, 0.04) for v in ("1", "2") for _ in range(3)])
    seen: set[str] = set()
    for i in range(6):  # the newer version last in one round, the older one last in the next
        order = ("1", "2", "2") if i % 2 else ("2", "2", "1")
        (f,) = _run(bc, clock, 10, lambda t, o=order: [_ev(clock, v, 0.04 if v == "1" else 0.02) for v in o])
        seen.add(f.labels["version"])
    assert seen == {"all"}
    assert f.active and f.labels["version"] == "all" and f.facts["version_scope"] == "all"
    book = _book()
    book.on_findings([f], clock.now())
    (a,) = book.alerts.values()
    assert a.labels["version"] == "all"
    assert "| model ctr (all versions) |" in a.annotations["summary"]
    assert " v1" not in a.annotations["summary"] and " v2" not in a.annotations["summary"]


def test_a_check_grouped_by_version_evaluates_each_version_and_links_its_own_trace(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    bc = _checks(tmp_path, clock, group_by=["model", "version"])
    n = iter(range(10**6))

    def events(t: float, regress: bool) -> list[Event]:
        # v1 is healthy but has the lowest single scores (outliers); v2 regresses as a whole.
        out = [_ev(clock, "1", 0.04, f"v1-{next(n)}") for _ in range(3)] + [_ev(clock, "1", 0.001, "v1-outlier")]
        out += [_ev(clock, "2", 0.02 if regress else 0.04, f"v2-{next(n)}") for _ in range(3)]
        return out

    _run(bc, clock, 600, lambda t: events(t, False))
    found = _run(bc, clock, 60, lambda t: events(t, True))
    by = {f.labels["version"]: f for f in found}
    assert set(by) == {"1", "2"} and by["2"].active and not by["1"].active
    assert by["2"].facts["version_scope"] == "version"
    assert by["2"].trace_id is not None and by["2"].trace_id.startswith("v2-")


def test_the_linked_trace_is_a_request_that_pulled_the_value_the_bad_way(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    bc = _checks(tmp_path, clock)
    _run(bc, clock, 600, lambda t: [_ev(clock, "1", 0.04, "old") for _ in range(4)])
    # The regression window: low-scoring requests (the bad ones) among normal ones, a normal one last.
    (f,) = _run(
        bc,
        clock,
        60,
        lambda t: [
            _ev(clock, "1", 0.01, f"bad-{t:.0f}"),
            _ev(clock, "1", 0.02, "low"),
            _ev(clock, "1", 0.02),
            _ev(clock, "1", 0.04, "good"),
        ],
    )
    assert f.active and f.trace_id is not None and f.trace_id.startswith("bad-")


def test_text_never_prints_vunversioned() -> None:
    f = Finding(
        check="wer_high",
        kind="business",
        labels={"model": "asr", "version": "unversioned"},
        active=True,
        value=0.1,
        threshold=0.08,
        window_secs=300,
        severity="high",
        facts={"display_name": "WER", "aggregate": "mean", "direction": "up", "compare": "absolute", "events": 40},
    )
    book = _book()
    book.on_findings([f], T0)
    (a,) = book.alerts.values()
    assert "vunversioned" not in a.annotations["summary"] + a.annotations["description"]
    assert "| model asr |" in a.annotations["summary"]
