"""The goodput check: per-request figures from events' fields, good/total per (model, version) in bounded time
buckets, multi-window burn rates, the counters of what was not judged, and the finding's words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from sidecar.alerting.render.kinds import RENDERERS
from sidecar.checks.goodput.check import GoodputCheck
from sidecar.checks.goodput.config import GoodputConfig, RequestSlo
from sidecar.checks.goodput.figures import figures, judge
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.facts_llm import GoodputFacts
from sidecar.model import Batch, Event

T0 = 1_764_892_800.0
GOOD = {"ttft_ms": 120.0, "inter_token_ms": 20.0, "tokens_out": 100.0}
SLOW_TTFT = {"ttft_ms": 900.0, "inter_token_ms": 20.0, "tokens_out": 100.0}


def _check(**cfg: Any) -> tuple[GoodputCheck, CollectorRegistry]:
    reg = CollectorRegistry()
    return GoodputCheck(GoodputConfig(enabled=True, **cfg), registry=reg), reg


def _feed(chk: GoodputCheck, at: float, fields: Mapping[str, float], n: int, model: str = "chat", v: str = "3") -> None:
    items = tuple(Event(model=model, version=v, timestamp=at, fields=dict(fields)) for _ in range(n))
    chk.observe(Batch(kind="events", source="http", items=items, received_at=at))


def test_inter_token_is_taken_from_tpot_or_derived_from_latency_and_tokens() -> None:
    assert figures({"inter_token_ms": 30.0, "tpot_ms": 99.0}).inter_token_ms == 30.0
    assert figures({"tpot_ms": 40.0}).inter_token_ms == 40.0
    # (1100 - 100) / (11 - 1): the mean gap after the first token
    assert figures({"ttft_ms": 100.0, "latency_ms": 1100.0, "tokens_out": 11.0}).inter_token_ms == 100.0
    assert figures({"ttft_ms": 100.0, "latency_ms": 1100.0}).inter_token_ms is None
    assert figures({"ttft_ms": float("nan")}).ttft_ms is None


def test_a_request_is_good_only_when_it_meets_every_bound() -> None:
    slo = RequestSlo(ttft_ms=500, inter_token_ms=50)
    assert judge(figures(GOOD), slo) == (True, ())
    assert judge(figures({"ttft_ms": 501.0, "inter_token_ms": 51.0}), slo) == (False, ("ttft", "inter_token"))
    assert judge(figures({"inter_token_ms": 10.0}), slo) is None  # no TTFT: not judged
    assert judge(figures({"ttft_ms": 100.0, "tokens_out": 1.0}), slo) == (True, ())  # one token: no gap


def test_counters_per_model_version_and_every_unjudged_request_counted() -> None:
    chk, reg = _check(slos={"chat": RequestSlo(ttft_ms=500, inter_token_ms=50)}, max_series=1)
    _feed(chk, T0, GOOD, 3)
    _feed(chk, T0, SLOW_TTFT, 2)
    _feed(chk, T0, {"inter_token_ms": 3.0}, 4)  # no ttft
    _feed(chk, T0, {"clicked": 1.0}, 7)  # no LLM figure at all: another kind of event
    _feed(chk, T0, GOOD, 5, model="other")  # no SLO for it, no "*"
    _feed(chk, T0, GOOD, 6, v="4")  # a second series over max_series=1
    get = reg.get_sample_value
    assert get("sidecar_goodput_requests_total", {"model": "chat", "version": "3", "good": "true"}) == 3
    assert get("sidecar_goodput_requests_total", {"model": "chat", "version": "3", "good": "false"}) == 2
    assert get("sidecar_goodput_slo_missed_total", {"model": "chat", "version": "3", "slo": "ttft"}) == 2
    assert get("sidecar_goodput_dropped_total", {"reason": "missing_field"}) == 4
    assert get("sidecar_goodput_dropped_total", {"reason": "no_llm_fields"}) == 7
    assert get("sidecar_goodput_dropped_total", {"reason": "no_slo"}) == 5
    assert get("sidecar_goodput_dropped_total", {"reason": "series_limit"}) == 6
    assert get("sidecar_gen_ai_server_time_to_first_token_seconds_count", {"model": "chat", "version": "3"}) == 5
    # The SLO bound is a bucket edge, so a histogram-based goodput is exact there.
    le = {"model": "chat", "version": "3", "le": "0.5"}
    assert get("sidecar_gen_ai_server_time_to_first_token_seconds_bucket", le) == 3


def test_fast_burn_fires_on_both_windows_and_says_which_slo() -> None:
    chk, reg = _check()
    for m in range(60):  # an hour with 20% slow first tokens: 20x the 1% budget on every window
        at = T0 + m * 60 + 1
        _feed(chk, at, GOOD, 80)
        _feed(chk, at, SLOW_TTFT, 20)
    (f,) = chk.evaluate(T0 + 3599)
    assert f.active and f.kind == "goodput" and f.check == "goodput_burn" and f.severity == "critical"
    assert isinstance(f.facts, GoodputFacts)
    assert (f.facts.good, f.facts.requests) == (4800, 6000)
    assert f.facts.burn_long == pytest.approx(20.0) and f.facts.burn_short == pytest.approx(20.0)
    assert (f.facts.worst, f.facts.worst_misses) == ("ttft", 1200)
    assert f.value == pytest.approx(0.8)
    assert reg.get_sample_value("sidecar_goodput_condition", {"model": "chat", "version": "3"}) == 1
    summary, description = RENDERERS["goodput"](f)
    assert summary == "chat v3 goodput 80% burning its 99% objective: 20x over 1h, 20x over 5m (most missed: ttft)"
    assert "TTFT <= 500 ms and inter-token <= 50 ms" in description and "(1200 requests)" in description


def test_burn_pair_needs_both_windows_above_the_factor() -> None:
    chk, reg = _check()
    for m in range(60):
        at = T0 + m * 60 + 1
        _feed(chk, at, GOOD, 100 if m < 55 else 70)
        if m >= 55:
            _feed(chk, at, SLOW_TTFT, 30)
    # On a bucket boundary: the 300 s window is exactly the last five buckets (a second earlier it would also
    # overlap the sixth, still counted while any of it is inside the window).
    (f,) = chk.evaluate(T0 + 3600)
    short = reg.get_sample_value("sidecar_goodput_burn_rate", {"model": "chat", "version": "3", "window_secs": "300"})
    long = reg.get_sample_value("sidecar_goodput_burn_rate", {"model": "chat", "version": "3", "window_secs": "3600"})
    assert short is not None and short == pytest.approx(30.0)  # 30% bad / 1% budget
    assert long is not None and long == pytest.approx(2.5)
    assert not f.active  # the 6h/30m pair: 30m burns 150/3000 = 5x < 6x; the 1h/5m pair: 2.5x < 14.4x
    assert reg.get_sample_value("sidecar_goodput_condition", {"model": "chat", "version": "3"}) == 0


def test_too_few_requests_is_no_decision_and_quiet_series_are_forgotten() -> None:
    chk, reg = _check(min_requests=50)
    _feed(chk, T0, SLOW_TTFT, 10)
    (f,) = chk.evaluate(T0 + 30)
    assert f.insufficient_data and not f.active
    assert RENDERERS["goodput"](f)[0] == "chat v3 goodput: too few requests to judge (10 of 50)"
    assert chk.evaluate(T0 + 6 * 3600 + 61) == []  # quiet for the longest window: gone, gauges with it
    assert reg.get_sample_value("sidecar_goodput_condition", {"model": "chat", "version": "3"}) is None


def test_buckets_are_bounded_by_the_longest_window() -> None:
    chk, _ = _check(bucket_secs=60)
    for m in range(10 * 60):  # ten hours of minutes; the longest window is 6h
        _feed(chk, T0 + m * 60, GOOD, 1)
    assert len(chk.series[("chat", "3")].buckets) <= 6 * 60 + 1


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"checks\.goodput\.slos\.chat: .*ttft_ms, inter_token_ms or e2e_ms"):
        parse_config({"checks": {"goodput": {"enabled": True, "slos": {"chat": {}}}}})
    with pytest.raises(ValidationError, match="short_secs"):
        GoodputConfig(burn_windows=[{"long_secs": 300, "short_secs": 3600, "factor": 2}])
    with pytest.raises(ConfigError, match=r"checks\.goodput\.objective"):
        parse_config({"checks": {"goodput": {"objective": 1.5}}})


def test_one_pass_windows_equal_each_window_counted_alone() -> None:
    chk, _ = _check(bucket_secs=60)
    for m in range(400):
        _feed(chk, T0 + m * 60 + 7, GOOD if m % 3 else SLOW_TTFT, 1 + m % 5)
    s = chk.series[("chat", "3")]
    now = T0 + 400 * 60 + 30
    secs = [300.0, 1800.0, 3600.0, 21600.0]
    together = s.windows(now, secs)
    for x in secs:
        alone = s.window(now, x)
        assert (together[x].good, together[x].total, together[x].misses) == (alone.good, alone.total, alone.misses)
    assert together[300.0].total < together[1800.0].total < together[3600.0].total < together[21600.0].total
