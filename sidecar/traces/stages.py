"""Per model and version, the time each request spent in each Triton stage, as histograms with trace-id
exemplars.

Stages come from the events Triton puts on its spans (the same names in OTLP and in ``mode=triton`` files,
which
``tracefile`` turns into the same span shape):

=================  ===========================================================  ==============
stage              from -> to                                                   span
=================  ===========================================================  ==============
network_receive    HTTP_RECV_START -> HTTP_RECV_END (GRPC_WAITREAD_*)           InferRequest
queue              QUEUE_START (model span) -> COMPUTE_START (compute span)     model, compute
compute_input      COMPUTE_START -> COMPUTE_INPUT_END                           compute
compute_infer      COMPUTE_INPUT_END -> COMPUTE_OUTPUT_START                    compute
compute_output     COMPUTE_OUTPUT_START -> COMPUTE_END                          compute
send               HTTP_SEND_START -> HTTP_SEND_END (GRPC_SEND_*)               InferRequest
request            REQUEST_START -> REQUEST_END                                 model
=================  ===========================================================  ==============

Exemplars are only rendered in the OpenMetrics exposition: ``render_metrics`` picks the format from the
scraper's
Accept header, and the app's /metrics route should use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder

from sidecar.model import Span
from sidecar.traces.store import MODEL_ATTR, VERSION_ATTR, TraceEntry

__all__ = ["STAGES", "StageHistograms", "render_metrics", "stage_durations"]

STAGES = ("network_receive", "queue", "compute_input", "compute_infer", "compute_output", "send", "request")


def render_metrics(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The exposition of ``registry`` in the format the Accept header asks for, and its content type.

    Prometheus asks for ``application/openmetrics-text`` when exemplar storage is on; only that format carries
    exemplars. Everything else gets the classic text format.
    """
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


def _ev(span: Span | None) -> dict[str, int]:
    return {e.name: e.time_unix_nano for e in span.events} if span is not None else {}


def _gap(ev: dict[str, int], a: str, b: str, alt_a: str = "", alt_b: str = "") -> float | None:
    ta = ev.get(a) if a in ev else ev.get(alt_a)
    tb = ev.get(b) if b in ev else ev.get(alt_b)
    if ta is None or tb is None or tb < ta:
        return None
    return (tb - ta) / 1e9


def stage_durations(model_span: Span, compute: Span | None, request: Span | None) -> dict[str, float]:
    """Seconds per stage for one model span and its compute child and request parent (missing ones
    skipped)."""
    m, c, r = _ev(model_span), _ev(compute), _ev(request)
    out: dict[str, float] = {}
    pairs: list[tuple[str, float | None]] = [
        (
            "network_receive",
            _gap(r, "HTTP_RECV_START", "HTTP_RECV_END", "GRPC_WAITREAD_START", "GRPC_WAITREAD_END"),
        ),
        ("queue", _gap({**m, **c}, "QUEUE_START", "COMPUTE_START") if c else None),
        ("compute_input", _gap(c, "COMPUTE_START", "COMPUTE_INPUT_END")),
        ("compute_infer", _gap(c, "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START")),
        ("compute_output", _gap(c, "COMPUTE_OUTPUT_START", "COMPUTE_END")),
        ("send", _gap(r, "HTTP_SEND_START", "HTTP_SEND_END", "GRPC_SEND_START", "GRPC_SEND_END")),
        ("request", _gap(m, "REQUEST_START", "REQUEST_END")),
    ]
    for name, v in pairs:
        if v is not None:
            out[name] = v
    return out


class StageHistograms:
    def __init__(
        self, registry: CollectorRegistry, *, buckets: Sequence[float], max_model_versions: int
    ) -> None:
        self._hist = Histogram(
            "sidecar_triton_stage_duration_seconds",
            "Time Triton requests spent in each stage, by model and version "
            "(from spans; exemplars carry trace_id).",
            ["model", "version", "stage"],
            buckets=tuple(buckets),
            registry=registry,
        )
        self._refused = Counter(
            "sidecar_traces_stage_series_refused",
            "Stage observations dropped because max_model_versions was reached.",
            registry=registry,
        )
        self._max = max_model_versions
        self._pairs: set[tuple[str, str]] = set()

    def observe_entries(self, entries: Iterable[TraceEntry]) -> int:
        """Observe every stage newly computable in these traces (each stage of a model span only once)."""
        n = 0
        for e in entries:
            if not e.model:
                continue
            by_id = {s.span_id: s for s in e.spans}
            children: dict[str, Span] = {}
            for s in e.spans:
                if s.name == "compute" and s.parent_span_id:
                    children[s.parent_span_id] = s
            for s in e.spans:
                model = s.attributes.get(MODEL_ATTR)
                if model is None:
                    continue
                version = str(s.attributes.get(VERSION_ATTR, ""))
                request = by_id.get(s.parent_span_id) if s.parent_span_id else None
                durations = stage_durations(s, children.get(s.span_id), request)
                for stage, secs in durations.items():
                    key = f"{s.span_id}:{stage}"
                    if key in e.observed:
                        continue
                    e.observed.add(key)
                    if not self._admit(str(model), version):
                        continue
                    self._hist.labels(str(model), version, stage).observe(
                        secs, exemplar={"trace_id": e.trace_id}
                    )
                    n += 1
        return n

    def _admit(self, model: str, version: str) -> bool:
        pair = (model, version)
        if pair in self._pairs:
            return True
        if len(self._pairs) >= self._max:
            self._refused.inc()
            return False
        self._pairs.add(pair)
        return True
