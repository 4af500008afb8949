"""Exposition: exemplars in OpenMetrics, promtool-clean text, and the failure join's counter parsing."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.exposition import render_metrics
from sidecar.polled import ManualTicker
from sidecar.sources.otlp.decode import decode_json
from sidecar.sources.triton_failures import FailureJoin, failure_counts
from sidecar.state.trace_hub import TraceHub


def _hub(reg: CollectorRegistry, **cfg: object) -> TraceHub:
    hub = TraceHub(parse_config({"traces": {"enabled": True, **cfg}}).traces, registry=reg, clock=FakeClock())
    hub.ingest(decode_json((DATA / "otlp-traces-triton.json").read_bytes()).spans, "otlp")
    return hub


def test_exemplars_only_in_openmetrics():
    reg = CollectorRegistry()
    _hub(reg)
    om, ctype = render_metrics(reg, "application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text")
    assert b'sidecar_triton_stage_duration_seconds_bucket{le="5e-05",model="ctr"' in om
    assert b'# {trace_id="' in om
    text, ctype2 = render_metrics(reg, "text/plain")
    assert ctype2.startswith("text/plain") and b"# {trace_id" not in text


@pytest.mark.prometheus
def test_exposition_passes_promtool(tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    reg = CollectorRegistry()
    _hub(reg, max_model_versions=1)  # also exercises the refused-series counter
    text, _ = render_metrics(reg, None)
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"sidecar_traces_stage_series_refused_total" in text


def test_max_model_versions_bounds_the_label_pairs():
    reg = CollectorRegistry()
    _hub(reg, max_model_versions=1)
    pairs = {
        (s.labels["model"], s.labels["version"])
        for m in reg.collect()
        if m.name == "sidecar_triton_stage_duration_seconds"
        for s in m.samples
    }
    assert len(pairs) == 1
    assert (reg.get_sample_value("sidecar_traces_stage_series_refused_total") or 0) > 0


METRICS_1 = 'nv_inference_request_failure{model="fraud",reason="BACKEND",version="1"} 0\n'
METRICS_2 = (
    'nv_inference_request_failure{model="fraud",reason="BACKEND",version="1"} 2\n'
    'nv_inference_request_failure{model="fraud",reason="OTHER",version="1"} 1\n'
    'nv_inference_request_success{model="fraud",version="1"} 9\n'
)


def test_failure_counts_sums_reasons():
    assert failure_counts(METRICS_2) == {("fraud", "1"): 3.0}


async def test_failure_join_marks_traces_possibly_failed_via_mock_transport():
    reg = CollectorRegistry()
    clock = FakeClock(start=1_796_218_366.0)  # the fixture's spans start at ~1796218366.33 s
    hub = _hub(reg)
    bodies = iter([METRICS_1, METRICS_2])
    transport = httpx.MockTransport(lambda req: httpx.Response(200, text=next(bodies)))
    # The fixture has no fraud traces: relabel the ctr v1 traces as the joined model for this test.
    cfg = parse_config({"traces": {"failure_join": {"metrics_url": "http://triton:8002/metrics"}}})
    async with httpx.AsyncClient(transport=transport) as http:
        join = FailureJoin(cfg.traces.failure_join, hub=hub, http=http, registry=reg, clock=clock)
        await join.poll_once()
        for e in (hub.store.get(t.trace_id) for t in hub.store.summaries(model="ctr", version="1")):
            assert e is not None
            e.model = "fraud"
        clock.advance(5)
        marked = await join.poll_once(apply_all=True)
    fraud = hub.store.summaries(model="fraud")
    assert marked == len(fraud) > 3
    assert all("possibly failed: Triton counted 3 failure(s)" in t.failure_note and not t.error for t in fraud)


def test_failures_already_known_from_caller_spans_are_not_pinned_on_other_traces():
    reg = CollectorRegistry()
    hub = _hub(reg)
    entries = [hub.store.get(t.trace_id) for t in hub.store.summaries(model="ctr", version="1")]
    assert len(entries) >= 4
    window = (min(e.start_ns for e in entries), max(e.start_ns for e in entries) + 1)
    entries[0].error = True  # a caller span said this request failed
    # Triton counted exactly one failure: the known one explains it, so nothing else is marked.
    assert hub.store.mark_failures("ctr", "1", *window, 1) == 0
    assert all(e.failure_note == "" for e in entries[1:])
    # Two failures: one is unexplained, and it could be any of the other traced requests.
    assert hub.store.mark_failures("ctr", "1", *window, 2) == len(entries) - 1
    assert all(
        "possibly failed: Triton counted 1 failure(s) not explained" in e.failure_note and not e.error
        for e in entries[1:]
    )
    # As many unexplained failures as other traced requests: they all failed.
    assert hub.store.mark_failures("ctr", "1", *window, len(entries)) == len(entries) - 1
    assert all(e.error for e in entries)


async def test_a_failing_expiry_run_is_counted_and_the_loop_goes_on(monkeypatch):
    reg = CollectorRegistry()
    tickers: list[ManualTicker] = []

    def ticker(*args: Any) -> ManualTicker:
        tickers.append(ManualTicker(*args))
        return tickers[-1]

    cfg = parse_config({"traces": {"enabled": True, "max_age_secs": 0.05}}).traces
    hub = TraceHub(cfg, registry=reg, clock=FakeClock(), ticker=ticker)
    runs = []

    def broken(now: float) -> None:
        runs.append(now)
        raise RuntimeError("expiry bug")

    monkeypatch.setattr(hub.store, "expire", broken)
    await hub.start()
    (expiry,) = tickers
    assert expiry.running and expiry.name == "traces-expire" and expiry.interval_secs == 0.005
    await expiry.tick()
    await expiry.tick()  # the loop goes on after a failed run
    await hub.shutdown()
    assert not expiry.running
    assert len(runs) == 2
    assert reg.get_sample_value("sidecar_traces_expiry_errors_total") == 2


def test_a_refused_model_counts_every_stage_observation_it_loses():
    """One refusal per lost observation (7 per request), whatever the span order and batching: stage pairing
    observes a model span's stages together, and must not count such a group once."""
    import random

    from sidecar.sources.otlp.decode import decode_json as dj

    records = dj((DATA / "otlp-traces-triton.json").read_bytes()).records
    shuffled = list(records)
    random.Random(5).shuffle(shuffled)
    for order, step in ((records, len(records)), (shuffled, 7), (list(reversed(records)), 1)):
        reg = CollectorRegistry()
        cfg = parse_config({"traces": {"enabled": True, "max_model_versions": 1}}).traces
        hub = TraceHub(cfg, registry=reg, clock=FakeClock())
        for i in range(0, len(order), step):
            hub.ingest_records(order[i : i + step], "otlp")
        # 120 requests of three models; one model holds the only slot, the other two's 80 requests are refused.
        assert reg.get_sample_value("sidecar_traces_stage_series_refused_total") == 80 * 7
        counts = [
            s.value
            for m in reg.collect()
            if m.name == "sidecar_triton_stage_duration_seconds"
            for s in m.samples
            if s.name.endswith("_count")
        ]
        assert counts == [40] * 7
