"""Token-length drift: no shift gives no finding over many windows (the false-alarm budget holds on a fixed seed),
30% longer prompts give a finding within three windows, a change of bucket edges refuses the test, a server
restart (counter reset) neither spikes nor hides, and per-request counts from events get the same test."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from sidecar.alerting.render.kinds import RENDERERS
from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.tokens.check import TokenDriftCheck
from sidecar.checks.tokens.config import TokensConfig
from sidecar.checks.tokens.hist import TokenHistogram
from sidecar.errors import DataFileError
from sidecar.facts_llm import TokenDriftFacts
from sidecar.model import Batch, Event, Finding

W = 300.0
T0 = 1_764_892_800.0  # a multiple of W
VLLM_4K = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0)  # build_1_2_5_buckets(4096)
VLLM_8K = (*VLLM_4K, 5000.0)  # build_1_2_5_buckets(8192): a restart with a longer max_model_len


class FakeServer:
    """A server's cumulative prompt/generation histograms, as its /metrics would hold them."""

    def __init__(self, seed: int, edges: tuple[float, ...] = VLLM_4K, name: str = "vllm") -> None:
        self.rng = np.random.default_rng(seed)
        self.name = name
        self.edges = edges
        self.cum = {"input": np.zeros(len(edges) + 1), "output": np.zeros(len(edges) + 1)}
        self.sums = {"input": 0.0, "output": 0.0}

    def serve(self, n: int, prompt_scale: float = 1.0) -> None:
        for d, median, scale in (("input", 300.0, prompt_scale), ("output", 150.0, 1.0)):
            x = np.round(self.rng.lognormal(math.log(median), 0.6, n) * scale)
            idx = np.searchsorted(np.asarray(self.edges), x, side="left")
            self.cum[d] += np.bincount(idx, minlength=len(self.edges) + 1)
            self.sums[d] += float(x.sum())

    def restart(self, edges: tuple[float, ...] | None = None) -> None:
        self.edges = edges or self.edges
        self.cum = {d: np.zeros(len(self.edges) + 1) for d in self.cum}
        self.sums = {d: 0.0 for d in self.sums}

    def readings(self) -> list[TokenHistogram]:
        out = []
        for d, per_bin in self.cum.items():
            cum = np.cumsum(per_bin)
            buckets = (*zip(self.edges, cum[:-1].tolist(), strict=True), (math.inf, float(cum[-1])))
            out.append(TokenHistogram(self.name, "chat", "", d, buckets, self.sums[d], float(cum[-1])))
        return out


def _check(server: FakeServer | None = None, **cfg: Any) -> tuple[TokenDriftCheck, CollectorRegistry]:
    reg = CollectorRegistry()
    conf = TokensConfig.model_validate({"enabled": True, "window_secs": W, **cfg})
    chk = TokenDriftCheck(conf, budget=DriftConfig(), registry=reg, histograms=server.readings if server else None)
    return chk, reg


def _by(found: list[Finding], tokens: str, server: str = "vllm") -> Finding:
    (f,) = [f for f in found if f.labels["tokens"] == tokens and f.labels["server"] == server]
    return f


def _run(chk: TokenDriftCheck, srv: FakeServer, windows: int, start: int, per_window: int = 600, **kw: Any) -> list:
    """Each window: traffic in three scrapes, then one evaluation just after the window ends."""
    out = []
    for w in range(start, start + windows):
        for i in range(3):
            srv.serve(per_window // 3, **kw)
            chk.evaluate(T0 + w * W + (i + 1) * W / 4)
        out.append(list(chk.evaluate(T0 + (w + 1) * W + 1)))
    return out


def test_no_shift_no_finding_over_a_day_of_windows_and_few_drifted_looks() -> None:
    srv = FakeServer(seed=7)
    chk, reg = _check(srv)
    per_window = _run(chk, srv, windows=288, start=0)  # a day of 5-minute windows, 600 requests each
    assert not any(f.active for found in per_window for f in found)
    tested = reg.get_sample_value("sidecar_token_drift_looks_total", _lab("input", "quiet")) or 0
    looks = "sidecar_token_drift_looks_total"
    drifted = sum(reg.get_sample_value(looks, _lab(d, "drifted")) or 0 for d in ("input", "output"))
    assert tested >= 280  # the reference took the first windows
    # Each look rejects with probability <= the level (about 0.0076 at the defaults), and the PSI floor on top.
    assert drifted <= 2, drifted
    f = _by(per_window[-1], "input")
    assert f.facts["state"] == "tested" and f.facts["psi"] < 0.05
    assert RENDERERS["token_drift"](f)[0].startswith("chat all versions prompt lengths match the reference on vllm")


def _lab(tokens: str, result: str) -> dict[str, str]:
    return {"server": "vllm", "model": "chat", "version": "", "tokens": tokens, "result": result}


def test_thirty_percent_longer_prompts_fire_within_three_windows() -> None:
    srv = FakeServer(seed=11)
    chk, reg = _check(srv)
    _run(chk, srv, windows=8, start=0)
    shifted = _run(chk, srv, windows=3, start=8, prompt_scale=1.3)
    active = [_by(found, "input").active for found in shifted]
    assert active[-1] and active.index(True) <= 2, active  # 2 drifting windows of 3 confirm: window 2 or 3
    assert not any(_by(found, "output").active for found in shifted)  # generation lengths did not move
    f = _by(shifted[-1], "input")
    facts = f.facts
    assert isinstance(facts, TokenDriftFacts)
    assert facts.q is not None and facts.q < facts.level and facts.psi is not None and facts.psi >= 0.1
    assert facts.mean_cur is not None and facts.mean_ref is not None
    assert 1.2 < facts.mean_cur / facts.mean_ref < 1.4
    summary, description = RENDERERS["token_drift"](f)
    assert summary.startswith("chat all versions prompt lengths drift on vllm: mean ")
    assert re.search(r"in the reference \(\+[23]\d%\), PSI 0\.\d+; [23] of the last 3 5m windows drifted$", summary)
    assert "no request was logged" in description and "false-alarm budget" in description
    key = {"server": "vllm", "model": "chat", "version": "", "tokens": "input"}
    assert reg.get_sample_value("sidecar_token_drift_drifting", key) == 1
    assert reg.get_sample_value("sidecar_token_drift_psi", key) == pytest.approx(facts.psi)


def test_a_change_of_bucket_edges_refuses_the_test_and_names_both() -> None:
    srv = FakeServer(seed=3)
    chk, reg = _check(srv)
    _run(chk, srv, windows=6, start=0)
    srv.restart(edges=VLLM_8K)  # restarted with max_model_len 8192: one more bucket
    found = _run(chk, srv, windows=3, start=6, prompt_scale=1.5)[-1]
    f = _by(found, "input")
    assert not f.active and f.insufficient_data and f.facts["state"] == "bucket_edges_changed"
    assert f.facts["ref_edges"] == "1,2,5,10,20,50,100,200,500,1000,2000"
    assert f.facts["cur_edges"] == "1,2,5,10,20,50,100,200,500,1000,2000,5000"
    summary = RENDERERS["token_drift"](f)[0]
    assert "not tested, the bucket edges changed" in summary and "now 1,2,5" in summary
    key = {"server": "vllm", "model": "chat", "version": "", "tokens": "input"}
    assert reg.get_sample_value("sidecar_token_drift_edges_mismatch", key) == 1
    restarts = "sidecar_token_drift_histogram_restarts_total"
    assert reg.get_sample_value(restarts, {"server": "vllm", "reason": "edges_changed"}) == 2
    assert reg.get_sample_value("sidecar_token_drift_looks_total", {**key, "result": "bucket_edges_changed"}) == 3


def test_a_server_restart_is_counted_from_zero_not_as_a_spike() -> None:
    srv = FakeServer(seed=5)
    chk, reg = _check(srv)
    _run(chk, srv, windows=5, start=0)
    srv.serve(200)
    chk.evaluate(T0 + 5 * W + 10)  # 200 requests of window 5 read
    srv.restart()
    srv.serve(150)  # the restarted server's first requests, all below the last reading
    chk.evaluate(T0 + 5 * W + 100)
    srv.serve(250)
    found = chk.evaluate(T0 + 6 * W + 1)
    f = _by(list(found), "input")
    assert f.facts["state"] == "tested" and f.facts["n_cur"] == 600  # 200 + 150 + 250: nothing lost, no spike
    assert not f.active
    restarts = "sidecar_token_drift_histogram_restarts_total"
    assert reg.get_sample_value(restarts, {"server": "vllm", "reason": "reset"}) == 2


def test_per_request_counts_from_events_get_the_same_test() -> None:
    rng = np.random.default_rng(2)
    chk, reg = _check(None, reference={"pinned_requests": 1000})

    def window(w: int, scale: float) -> list[Finding]:
        ins = np.round(rng.lognormal(math.log(300), 0.6, 500) * scale)
        items = tuple(
            Event(model="stream", version="1", timestamp=T0, fields={"tokens_in": float(x), "tokens_out": 40.0})
            for x in ins
        )
        chk.observe(Batch(kind="events", source="http", items=items, received_at=T0 + w * W))
        return list(chk.evaluate(T0 + (w + 1) * W + 1))

    for w in range(6):
        found = window(w, 1.0)
        assert not any(f.active for f in found)
    fired = [_by(window(w, 1.3), "input", "events").active for w in range(6, 9)]
    assert fired[-1], fired
    bad = Event(model="stream", version="1", timestamp=T0, fields={"tokens_in": -3.0, "tokens_out": float("nan")})
    chk.observe(Batch(kind="events", source="http", items=(bad,), received_at=T0 + 9 * W))
    assert reg.get_sample_value("sidecar_token_drift_dropped_total", {"reason": "bad_value"}) == 2
    pinned = {"server": "events", "model": "stream", "version": "1", "tokens": "input", "part": "reference"}
    assert reg.get_sample_value("sidecar_token_drift_requests_total", pinned) == 1000


def test_a_reference_file_is_named_and_a_bad_one_refused_at_start(tmp_path: Path) -> None:
    good = tmp_path / "ref.json"
    counts = [0, 0, 0, 0, 1, 10, 60, 230, 600, 99, 0, 0]
    doc = {"id": "chat-w48", "input": {"edges": list(VLLM_4K), "counts": counts, "sum": 300000}}
    good.write_text(json.dumps(doc))
    srv = FakeServer(seed=1)
    chk, _ = _check(srv, reference={"mode": "file", "path": str(good)})
    found = _run(chk, srv, windows=1, start=0)[-1]
    f = _by(found, "input")
    assert f.facts["ref_mode"] == "file" and f.facts["ref_id"] == "chat-w48" and f.facts["state"] == "tested"
    bad = tmp_path / "bad.json"
    bad.write_text('{"input": {"edges": [1, 2], "counts": [1, 2]}}')
    with pytest.raises(DataFileError, match=r"bad\.json: input\.counts: 2 counts for 2 edges"):
        _check(srv, reference={"mode": "file", "path": str(bad)})


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ValidationError, match="edges"):
        TokensConfig(edges=[10.0, 5.0])
    with pytest.raises(ValidationError, match="path"):
        TokensConfig.model_validate({"reference": {"mode": "file"}})
    with pytest.raises(ValidationError, match=r"models\.chat\.pinned_requests: below min_requests"):
        TokensConfig.model_validate({"min_requests": 500, "models": {"chat": {"pinned_requests": 100}}})


def test_asked_to_a_change_of_edges_takes_a_new_reference_and_tests_again() -> None:
    srv = FakeServer(seed=8)
    chk, reg = _check(srv, reference={"repin_on_edge_change": True})
    _run(chk, srv, windows=5, start=0)
    srv.restart(edges=VLLM_8K)
    found = _run(chk, srv, windows=6, start=5)
    f = _by(found[-1], "input")
    assert f.facts["state"] == "tested" and f.facts["ref_edges"] == "" and not f.active
    assert _by(found[0], "input").facts["state"] in ("no_reference", "bucket_edges_changed")
    key = {"server": "vllm", "model": "chat", "version": "", "tokens": "input"}
    assert reg.get_sample_value("sidecar_token_drift_repins_total", key) == 1
