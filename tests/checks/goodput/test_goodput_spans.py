"""LLM request spans (vLLM's ``llm_request`` with ``gen_ai.latency.*`` attributes in seconds) are judged like
events; other spans are skipped by name, and a request span without a model is counted, not judged."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.checks.goodput.check import GoodputCheck
from sidecar.checks.goodput.config import GoodputConfig, RequestSlo
from sidecar.checks.goodput.figures import span_fields
from sidecar.model import Batch, Span
from sidecar.records import from_span

T0 = 1_764_892_800.0


def _span(i: int, name: str, attrs: dict[str, object]) -> Span:
    start = int((T0 + i) * 1e9)
    return Span(f"{i + 1:032x}", f"{i + 1:016x}", None, name, start, start + 10**9, attributes=attrs)


def test_span_attributes_become_fields_in_ms() -> None:
    attrs = {
        "gen_ai.latency.time_to_first_token": 0.12,
        "gen_ai.latency.e2e": 2.1,
        "gen_ai.usage.completion_tokens": 51,
    }
    assert span_fields(attrs) == {"ttft_ms": 120.0, "latency_ms": 2100.0, "tokens_out": 51.0}
    assert span_fields({"gen_ai.usage.output_tokens": 7, "gen_ai.latency.e2e": "slow"}) == {"tokens_out": 7.0}


def test_llm_request_spans_are_judged_and_other_spans_skipped() -> None:
    reg = CollectorRegistry()
    chk = GoodputCheck(
        GoodputConfig(enabled=True, slos={"*": RequestSlo(ttft_ms=500, inter_token_ms=50)}), registry=reg
    )
    llm = {"gen_ai.response.model": "llama", "gen_ai.latency.e2e": 2.1, "gen_ai.usage.completion_tokens": 51}
    spans = [
        _span(0, "llm_request", {**llm, "gen_ai.latency.time_to_first_token": 0.1}),  # itl (2100-100)/50 = 40 ms
        _span(1, "llm_request", {**llm, "gen_ai.latency.time_to_first_token": 0.9}),  # ttft over 500 ms
        _span(2, "llm_request", {"gen_ai.latency.time_to_first_token": 0.1}),  # no model
        _span(3, "compute_infer", {"triton.model_name": "ctr"}),  # not an LLM request span
    ]
    chk.observe_spans(Batch(kind="spans", source="otlp", items=tuple(from_span(s) for s in spans), received_at=T0))
    get = reg.get_sample_value
    assert get("sidecar_goodput_requests_total", {"model": "llama", "version": "", "good": "true"}) == 1
    assert get("sidecar_goodput_requests_total", {"model": "llama", "version": "", "good": "false"}) == 1
    assert get("sidecar_goodput_slo_missed_total", {"model": "llama", "version": "", "slo": "ttft"}) == 1
    assert get("sidecar_goodput_dropped_total", {"reason": "no_model"}) == 1
    assert get("sidecar_goodput_dropped_total", {"reason": "missing_field"}) is None  # the Triton span: skipped
    assert get("sidecar_gen_ai_output_tokens_count", {"model": "llama", "version": ""}) == 2


def test_spans_are_not_read_when_no_span_name_is_configured() -> None:
    reg = CollectorRegistry()
    chk = GoodputCheck(GoodputConfig(enabled=True, span_names=[]), registry=reg)
    span = _span(0, "llm_request", {"gen_ai.response.model": "llama", "gen_ai.latency.time_to_first_token": 0.1})
    chk.observe_spans(Batch(kind="spans", source="otlp", items=(from_span(span),), received_at=T0))
    assert chk.series == {}
