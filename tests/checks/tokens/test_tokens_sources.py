"""Token lengths from LLM request spans, a reference pinned from another version, and the bounds: the series limit
and a quiet series forgotten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.tokens.check import TokenDriftCheck
from sidecar.checks.tokens.config import TokensConfig
from sidecar.model import Batch, Event, Span
from sidecar.records import from_span
from sidecar.store import Store

T0 = 1_764_892_800.0
W = 60.0
LLAMA = {"gen_ai.response.model": "llama"}
_KEY = {"server": "events", "model": "chat", "version": "1", "tokens": "input"}


def _check(store: Store | None = None, **cfg: Any) -> tuple[TokenDriftCheck, CollectorRegistry]:
    reg = CollectorRegistry()
    conf = TokensConfig.model_validate({"enabled": True, "window_secs": W, "min_requests": 50, **cfg})
    return TokenDriftCheck(conf, budget=DriftConfig(), registry=reg, store=store), reg


def _span(i: int, name: str, attrs: dict[str, object]) -> Span:
    start = int((T0 + i) * 1e9)
    return Span(f"{i + 1:032x}", f"{i + 1:016x}", None, name, start, start + 10**9, attributes=attrs)


def test_llm_request_spans_count_and_other_spans_are_skipped_by_name() -> None:
    chk, reg = _check()
    spans = [
        _span(
            0,
            "llm_request",
            {"gen_ai.response.model": "llama", "gen_ai.usage.prompt_tokens": 300, "gen_ai.usage.completion_tokens": 41},
        ),
        _span(1, "llm_request", {"gen_ai.request.model": "llama", "gen_ai.usage.input_tokens": 20}),
        _span(2, "llm_request", {"gen_ai.usage.input_tokens": 20}),  # no model
        _span(3, "compute_infer", {"gen_ai.response.model": "llama", "gen_ai.usage.input_tokens": 5}),
    ]
    chk.observe_spans(Batch(kind="spans", source="otlp", items=tuple(from_span(s) for s in spans), received_at=T0))
    get = reg.get_sample_value
    key = {"server": "events", "model": "llama", "version": ""}
    assert get("sidecar_token_drift_requests_total", {**key, "tokens": "input", "part": "reference"}) == 2
    assert get("sidecar_token_drift_requests_total", {**key, "tokens": "output", "part": "reference"}) == 1
    assert get("sidecar_token_drift_dropped_total", {"reason": "no_model"}) == 1


def _events(model: str, version: str, n: int, tokens: float, at: float) -> Batch:
    items = tuple(Event(model=model, version=version, timestamp=at, fields={"tokens_in": tokens}) for _ in range(n))
    return Batch(kind="events", source="http", items=items, received_at=at)


def test_every_version_is_compared_with_the_pinned_versions_reference() -> None:
    chk, _ = _check(reference={"pinned_version": "1", "pinned_requests": 100})
    chk.observe(_events("chat", "2", 100, 300.0, T0))  # version 2 first: no reference yet
    (f,) = chk.evaluate(T0 + W + 1)
    assert f.labels["version"] == "2" and f.facts["state"] == "no_reference"
    chk.observe(_events("chat", "1", 100, 300.0, T0 + W + 2))  # version 1's first 100 make the reference
    chk.observe(_events("chat", "2", 100, 700.0, T0 + W + 3))
    found = {f.labels["version"]: f for f in chk.evaluate(T0 + 2 * W + 1)}
    assert found["2"].facts["state"] == "tested" and found["2"].facts["ref_id"] == "v1"
    assert found["2"].facts["psi"] > 1 and found["1"].facts["state"] == "few_requests"  # v1's own: all reference


def test_the_series_limit_counts_and_a_quiet_series_is_forgotten() -> None:
    chk, reg = _check(max_series=1, series_idle_secs=600)
    chk.observe(_events("a", "1", 10, 300.0, T0))
    chk.observe(_events("b", "1", 10, 300.0, T0))
    assert reg.get_sample_value("sidecar_token_drift_dropped_total", {"reason": "series_limit"}) == 10
    assert [f.labels["model"] for f in chk.evaluate(T0 + 1)] == ["a"]
    assert chk.evaluate(T0 + 601) == []  # quiet for series_idle_secs: forgotten, its slot free
    chk.observe(_events("b", "1", 10, 300.0, T0 + 602))
    assert [f.labels["model"] for f in chk.evaluate(T0 + 603)] == ["b"]


def test_a_pinned_reference_survives_a_restart_so_shifted_traffic_is_not_pinned(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    try:
        conf = {"reference": {"pinned_requests": 100}}
        chk, _ = _check(store=store, **conf)
        chk.observe(_events("chat", "1", 100, 300.0, T0))  # the reference: 300-token prompts
        chk, reg = _check(store=store, **conf)  # a restart on the same store
        for w in range(1, 4):  # the prompts are now 700 tokens: tested against the stored reference
            chk.observe(_events("chat", "1", 100, 700.0, T0 + w * W))
            (f,) = chk.evaluate(T0 + (w + 1) * W + 1)
        assert f.active and f.facts["ref_id"] == "v1" and f.facts["n_ref"] == 100
        assert reg.get_sample_value("sidecar_token_drift_requests_total", {**_KEY, "part": "reference"}) is None
        store.put("tokens.ref", "junk", b"{")
        assert (
            _check(store=store, **conf)[1].get_sample_value(  # a bad row is counted, not raised
                "sidecar_token_drift_references_dropped_total", {"reason": "read_error"}
            )
            == 1
        )
    finally:
        store.close()
