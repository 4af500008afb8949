"""The trace hub (store and stage histograms, batched per chunk) against a frozen copy of how it stored spans and
observed stages one record at a time (tests/state/traces_before.py and stages_before.py, the code at ae3dd55): on
the recorded Triton trace files (replicated to 2,000 requests: chunks above BATCH_MIN spans are observed together
and whole stages go through numpy, the last chunk span by span), on recorded OTLP
JSON and protobuf exports in shuffled orders and batch sizes, re-sent, and with max_model_versions refusing
models, every stage observation (buckets, sums, counts, exemplars, series order), every stored span, every
trace's figures and class, and every counter are the same."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hub_before import HubBefore
from prometheus_client import CollectorRegistry
from trace_files_before import replicated, templates_of
from tracefile_helpers import published_span_batches
from traces_helpers import DATA, store_and_stage_samples

import sidecar.processors.stages as stages_mod
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.processors.stage_batch import VECTOR_MIN
from sidecar.records import Record
from sidecar.sources.otlp.decode import decode_json, decode_protobuf
from sidecar.state.trace_hub import TraceHub

TIMESTAMPS = (DATA / "trace-file-triton-mode.json").read_bytes()
TENSORS = (DATA / "trace-file-tensors.json").read_bytes()


def _file_batches(tmp: Path, data: bytes) -> list[list[Record]]:
    """The span batches the trace-file source publishes for ``data``."""
    return [list(b) for b in published_span_batches(tmp, data, max_read_bytes=1_000_000)]


def _otlp_records() -> list[Record]:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    body = (DATA / "otlp-traces-triton.json").read_bytes()
    pb = json_format.Parse(body, ExportTraceServiceRequest()).SerializeToString()
    return list(decode_json(body).records) + list(decode_protobuf(pb).records)


def _state(reg: CollectorRegistry, store: Any) -> dict[str, Any]:
    samples = store_and_stage_samples(reg)
    traces = [
        (cls, e.trace_id, list(e.by_id.items()), e.start_ns, e.end_ns, e.nbytes, e.error, e.model, e.version)
        for cls, od in (("plain", store._plain), ("kept", store._kept))
        for e in od.values()
    ]
    return {"samples": samples, "traces": traces, "bytes": store.nbytes}


def _both(batches: Sequence[Sequence[Record]], **cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    tcfg = parse_config({"traces": {"enabled": True, **cfg}}).traces
    reg_new, reg_old = CollectorRegistry(), CollectorRegistry()
    clock = FakeClock(start=1_796_218_366.0)
    hub = TraceHub(tcfg, registry=reg_new, clock=clock)
    old = HubBefore(tcfg, reg_old)
    for b in batches:
        clock.advance(0.5)
        hub.ingest_records(b, "t")
        old.ingest(b, clock.now())
    return _state(reg_new, hub.store), _state(reg_old, old.store)


@pytest.fixture
def vectored(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the stage observations applied at once (numpy above VECTOR_MIN)."""
    sizes: list[int] = []
    real = stages_mod.apply

    def spy(s: Any, ns: list[int], *a: Any) -> None:
        sizes.append(len(ns))
        real(s, ns, *a)

    monkeypatch.setattr(stages_mod, "apply", spy)
    return sizes


def test_trace_file_chunks_observe_and_store_as_before(tmp_path, vectored):
    batches = _file_batches(tmp_path, replicated(templates_of(TIMESTAMPS, TENSORS), 2000))
    assert len(batches) > 1 and sum(map(len, batches)) == 6000
    assert max(map(len, batches)) >= stages_mod.BATCH_MIN > min(map(len, batches))  # both paths
    new, old = _both(batches)
    assert new == old
    assert any(n >= VECTOR_MIN for n in vectored), "whole stages must go through numpy"
    counts = [v for name, _, v, _ in new["samples"] if name.endswith("_count")]
    assert sum(counts) == 2000 * 7


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("step", [1, 7, 100, 1000])
def test_otlp_in_any_order_and_batching_as_before(seed, step):
    records = _otlp_records()
    records = records + records[:50]  # re-sent spans: dropped as duplicates by both
    random.Random(seed).shuffle(records)
    new, old = _both([records[i : i + step] for i in range(0, len(records), step)])
    assert new == old
    assert any(name.endswith("_count") and v for name, _, v, _ in new["samples"])


@pytest.mark.parametrize("step", [3, 400])
def test_refused_models_and_full_traces_as_before(step):
    records = _otlp_records()
    batches = [records[i : i + step] for i in range(0, len(records), step)]
    new, old = _both(batches, max_model_versions=1, max_spans_per_trace=2, max_traces=50)
    assert new == old
    assert any(name == "sidecar_traces_stage_series_refused_total" and v for name, _, v, _ in new["samples"])
