"""The trace-file reader leaves the model probe's requests out, and gives a decoupled model's stream its
per-request figures.

Recorded inputs: tests/data/traces/trace-file-tensors.json (5 requests to the demo's ``ctr``, Triton 2.51,
TIMESTAMPS+TENSORS) and, in data/, two traces of tests/data/triton_streaming/token_stream (Triton 2.51 from
nvidia-pytriton 0.7.0, ``mode=triton``, ``level=TIMESTAMPS``, ``log-frequency=1``), as Triton wrote them:
``decoupled-empty-final.json`` (3 tokens 50 ms then 20 ms apart, the client asked for an empty final response:
4 ``GRPC_SEND_START``) and ``decoupled.json`` (the same without it: 3).
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from traces_helpers import DATA

from sidecar.checks.goodput.figures import figures, span_fields
from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.config import parse_config
from sidecar.records import NAME, to_span
from sidecar.sources.events.config import TensorMapping
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.trace_files.metrics import TraceFileMetrics
from sidecar.sources.trace_files.requests import MAX_REPEATS, Assembler, Request
from sidecar.sources.trace_files.settings import TraceFileSettings
from sidecar.sources.trace_files.source import TraceFileSource
from sidecar.sources.trace_files.streams import stream_figures
from sidecar.state.trace_hub import TraceHub
from sidecar.store import Store
from sidecar.wiring.span_subs import subscribe_spans

HERE = Path(__file__).parent / "data"
TENSORS = (DATA / "trace-file-tensors.json").read_text()
MAPPING = {"ctr": TensorMapping.model_validate({"inputs": {"x": ["a", "b", "c", "d"]}, "score": {"tensor": "score"}})}


def _read(folder: Path, files: list[str], mono_s: float, **settings: Any) -> dict[str, Any]:
    for i, text in enumerate(files):
        (folder / f"trace.json.{i}").write_text(text)
    reg = CollectorRegistry()
    clock = FakeClock(start=1_800_000_000.0, monotonic=mono_s)
    bus = Bus(reg)
    hub = TraceHub(parse_config({"traces": {"enabled": True}}).traces, registry=reg, clock=clock)
    spans: list[Any] = []
    events: list[Any] = []
    subscribe_spans(bus, "capture", lambda b: spans.extend(b.items))
    bus.subscribe("events", "capture", lambda b: events.extend(b.items))
    subscribe_spans(bus, hub.name, hub.on_spans, requests=hub.on_span_requests)
    src = TraceFileSource(
        TraceFileSettings(path=str(folder / "trace.json"), settle_secs=0.0, **settings),
        bus=bus,
        metrics=TraceFileMetrics(reg),
        clock=clock,
        store=Store(":memory:"),
        events_metrics=EventsMetrics(reg),
    )
    for _ in range(40):  # a read of max_read_bytes a poll; polls that complete no request publish nothing
        src.poll_once()
    return {"spans": spans, "events": events, "registry": reg}


def _stage_count(reg: CollectorRegistry, stage: str) -> float:
    total = 0.0
    for fam in reg.collect():
        for s in fam.samples:
            if s.name == "sidecar_triton_stage_duration_seconds_count" and s.labels["stage"] == stage:
                total += s.value
    return total


def test_the_probes_requests_are_not_spans_stages_or_events(tmp_path: Path) -> None:
    probe = TENSORS.replace('"request_id":"req-1"', '"request_id":"sidecar-probe-ctr-1"')
    assert probe != TENSORS
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = _read(tmp_path / "a", [TENSORS], 8400.0, tensors=MAPPING)
    got = _read(tmp_path / "b", [probe], 8400.0, tensors=MAPPING)
    reg = got["registry"]
    # One request of five left out: its three spans, its stage observations and its two event rows.
    assert len(got["spans"]) == len(plain["spans"]) - 3
    ids = {to_span(r).attributes.get("triton.request_id") for r in got["spans"]}
    assert "sidecar-probe-ctr-1" not in ids and "req-2" in ids
    assert _stage_count(reg, "request") == _stage_count(plain["registry"], "request") - 1 == 4
    assert {e.request_id for e in got["events"]} == {"req-2", "req-3", "req-4", "req-5"}
    assert reg.get_sample_value("sidecar_trace_file_probe_requests_dropped_total") == 1
    assert reg.get_sample_value("sidecar_events_rejected_total", {"source": "triton_trace", "reason": "probe"}) == 2
    assert reg.get_sample_value("sidecar_trace_file_requests_total") == 4
    assert plain["registry"].get_sample_value("sidecar_trace_file_probe_requests_dropped_total") == 0


def test_a_composing_request_under_a_probes_request_is_left_out_too(tmp_path: Path) -> None:
    """An ensemble's composing request carries its parent's trace id (``parent_id``), not the request id; it
    is left out with its parent even when it is read in a later pass (another file)."""
    parent = [
        {"id": 7, "model_name": "ens", "model_version": 1, "request_id": "sidecar-probe-ens-1"},
        {"id": 7, "timestamps": [{"name": "REQUEST_START", "ns": 8_000_000_000_000}]},
        {"id": 7, "timestamps": [{"name": "REQUEST_END", "ns": 8_000_001_000_000}]},
    ]
    child = [
        {"id": 8, "model_name": "ctr", "model_version": 1, "parent_id": 7},
        {"id": 8, "timestamps": [{"name": "REQUEST_START", "ns": 8_000_000_100_000}]},
        {"id": 8, "timestamps": [{"name": "REQUEST_END", "ns": 8_000_000_900_000}]},
    ]
    (tmp_path / "t").mkdir()
    got = _read(tmp_path / "t", [json.dumps(parent), json.dumps(child), TENSORS], 8400.0)
    assert got["registry"].get_sample_value("sidecar_trace_file_probe_requests_dropped_total") == 2
    assert {to_span(r).attributes.get("triton.model_name") for r in got["spans"]} == {None, "ctr"}
    assert len(got["spans"]) == 15  # the five requests of the tensors file only


def _recorded(name: str) -> list[dict[str, Any]]:
    return json.loads((HERE / name).read_text())


def _sends(records: list[dict[str, Any]]) -> list[int]:
    return sorted(t["ns"] for r in records for t in r.get("timestamps", []) if t["name"] == "GRPC_SEND_START")


def _one(records: list[dict[str, Any]]) -> Request:
    into: dict[int, Request] = {}
    Assembler(100, 256).add(records, into)
    (q,) = into.values()
    return q


@pytest.mark.parametrize(
    ("name", "written", "empty_final"), [("decoupled.json", 3, False), ("decoupled-empty-final.json", 4, True)]
)
def test_a_decoupled_trace_keeps_every_response_and_gives_its_figures(
    name: str, written: int, empty_final: bool
) -> None:
    records = _recorded(name)
    sends = _sends(records)
    assert len(sends) == written
    q = _one(records)
    assert q.stamps["GRPC_SEND_START"] == max(sends)  # the last one, as before (the spans' events)
    assert sorted(q.times_of("GRPC_SEND_START")) == sends
    assert len(q.times_of("GRPC_SEND_END")) == written
    fig = stream_figures(q, empty_final)
    assert fig is not None
    tokens = sends[:3]
    assert fig.responses == tuple(tokens) and fig.written == written
    assert fig.ttft_ns == tokens[0] - q.stamps["GRPC_WAITREAD_END"]
    assert fig.gaps_ns == [tokens[1] - tokens[0], tokens[2] - tokens[1]]
    # The scripted stream: first token 50 ms after execute, then 20 ms apart (a busy CPU adds a little).
    # (deadlines are absolute in the model: a late token shortens the next gap, the last stays on time).
    assert 45e6 < fig.ttft_ns < 150e6
    assert all(g > 0 for g in fig.gaps_ns) and 30e6 < sum(fig.gaps_ns) < 60e6, fig.gaps_ns
    # Without being told about the empty final response, it is a response like any other.
    if empty_final:
        every = stream_figures(q, False)
        assert every is not None and every.responses == tuple(sends)


def test_a_plain_request_has_no_stream_figures() -> None:
    q = _one(json.loads(TENSORS)[:15])
    assert q.repeats is None and stream_figures(q) is None


def test_the_llm_request_span_is_what_the_goodput_check_reads(tmp_path: Path) -> None:
    records = _recorded("decoupled-empty-final.json")
    shutil.copy(HERE / "decoupled-empty-final.json", tmp_path / "trace.json.0")
    mono = max(_sends(records)) / 1e9 + 5
    got = _read(tmp_path, [], mono, empty_final_response=True)
    spans = {r[NAME]: r for r in got["spans"]}
    assert set(spans) == {"InferRequest", "token_stream", "compute", "llm_request"}
    llm = to_span(spans["llm_request"])
    q = _one(records)
    fig = stream_figures(q, True)
    assert fig is not None
    assert llm.parent_span_id == to_span(spans["InferRequest"]).span_id
    assert llm.attributes["gen_ai.response.model"] == "token_stream"
    assert llm.attributes["triton.request_id"] == "req-1-True"
    assert llm.attributes["triton.response_count"] == 4
    assert llm.attributes["gen_ai.usage.output_tokens"] == 3
    assert [e.name for e in llm.events] == ["response"] * 3
    assert [e.time_unix_nano - llm.start_unix_nano for e in llm.events] == [t - fig.received_ns for t in fig.responses]
    fields = span_fields(llm.attributes)
    assert fields["ttft_ms"] == pytest.approx(fig.ttft_ns / 1e6)
    # The goodput check derives the inter-token latency from TTFT, e2e and tokens: the mean gap, exactly.
    assert figures(fields).inter_token_ms == pytest.approx(statistics.fmean(fig.gaps_ns) / 1e6)
    # The stream's other spans are as they were: one GRPC_SEND_START on the request span, the last.
    assert to_span(spans["InferRequest"]).events[-1].name in ("GRPC_SEND_END", "GRPC_SEND_START")


def test_a_stream_straddling_reads_keeps_every_response(tmp_path: Path) -> None:
    records = _recorded("decoupled.json")
    mono = max(_sends(records)) / 1e9 + 5
    whole = _read(tmp_path, [(HERE / "decoupled.json").read_text()], mono)
    (tmp_path / "small").mkdir()
    small = _read(tmp_path / "small", [(HERE / "decoupled.json").read_text()], mono, max_read_bytes=200)
    # (the ids differ: they derive from the file's path)
    a = [(s.attributes, s.events, s.start_unix_nano) for s in map(to_span, whole["spans"]) if s.name == "llm_request"]
    b = [(s.attributes, s.events, s.start_unix_nano) for s in map(to_span, small["spans"]) if s.name == "llm_request"]
    assert len(a) == 1 and a == b
    assert len(a[0][1]) == 3


def test_pending_requests_keep_their_repeats_across_a_restart() -> None:
    q = _one(_recorded("decoupled.json"))
    back = Request.from_json(json.loads(json.dumps(q.to_json())))
    assert back == q and back.repeats == q.repeats
    old = q.to_json()[:8]  # state written before repeats were kept
    assert Request.from_json(old).repeats is None


def test_repeats_are_bounded_and_counted() -> None:
    asm = Assembler(10, 256)
    into: dict[int, Request] = {}
    asm.add([(1, "GRPC_SEND_START", i) for i in range(MAX_REPEATS + 5)], into)
    assert len(into[1].times_of("GRPC_SEND_START")) == MAX_REPEATS
    assert asm.refused == {"too_many_repeats": 5}


@pytest.mark.parametrize("over", [1.0, -1.0])
def test_the_goodput_check_judges_a_decoupled_trace_from_its_llm_request_span(tmp_path: Path, over: float) -> None:
    """The source and the goodput check on one bus, as the service wires them: the stream is judged against
    inter-token bounds just above and just below its mean gap between responses (the empty final one left
    out)."""
    from sidecar.checks.goodput.check import GoodputCheck
    from sidecar.checks.goodput.config import GoodputConfig, RequestSlo

    records = _recorded("decoupled-empty-final.json")
    fig = stream_figures(_one(records), True)
    assert fig is not None
    gap_ms = statistics.fmean(fig.gaps_ns) / 1e6
    reg = CollectorRegistry()
    slo = RequestSlo(ttft_ms=fig.ttft_ns / 1e6 + 1, inter_token_ms=gap_ms + over)
    chk = GoodputCheck(GoodputConfig(enabled=True, slos={"token_stream": slo}), registry=reg)
    clock = FakeClock(start=1_800_000_000.0, monotonic=max(_sends(records)) / 1e9 + 5)
    bus = Bus(reg)
    subscribe_spans(bus, chk.name, chk.observe_spans)
    shutil.copy(HERE / "decoupled-empty-final.json", tmp_path / "trace.json.0")
    src = TraceFileSource(
        TraceFileSettings(path=str(tmp_path / "trace.json"), settle_secs=0.0, empty_final_response=True),
        bus=bus,
        metrics=TraceFileMetrics(reg),
        clock=clock,
        store=Store(":memory:"),
    )
    src.poll_once()
    labels = {"model": "token_stream", "version": ""}
    good = "true" if over > 0 else "false"
    assert reg.get_sample_value("sidecar_goodput_requests_total", {**labels, "good": good}) == 1
    missed = reg.get_sample_value("sidecar_goodput_slo_missed_total", {**labels, "slo": "inter_token"})
    assert missed == (None if over > 0 else 1)
