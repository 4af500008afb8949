"""A drift finding carries the evidence that made it active (typed ``DriftFacts``): the drifting blocks of the
scale that met the sustained rule, each with its n, D, p (raw and BH) and level, and the reference it was
tested against; the latest look is kept apart as ``now``. The evidence survives a restart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from drift_testutil import built_check, ctx_of, make_ctx
from scipy.stats import false_discovery_control, ks_2samp

from sidecar.alerting.render import finding_text
from sidecar.checks.drift.check import DriftCheck
from sidecar.clock import FakeClock
from sidecar.facts import DriftBlock, DriftFacts
from sidecar.model import Finding

T0 = 1_700_000_000.0 - 1_700_000_000.0 % 1800
REF = 1000


def _check(tmp_path: Path, clock: FakeClock) -> DriftCheck:
    cfg = {
        "enabled": True,
        "method": "multiscale",
        "eval_threads": 1,
        "min_samples": 100,
        "reference": {"mode": "pinned", "pinned_events": REF},
    }
    return built_check(make_ctx(tmp_path / "s.sqlite", clock, {"checks": {"drift": cfg}}))


def _block(check: DriftCheck, clock: FakeClock, a: np.ndarray, b: np.ndarray, end: float) -> list[Finding]:
    clock.advance(end - 59 - clock.now())
    check.observe_columns("m", "1", clock.now(), {"a": a, "b": b})
    clock.advance(end - clock.now())
    return list(check.evaluate(end))


def _b(findings: list[Finding]) -> Finding:
    return next(f for f in findings if f.labels["feature"] == "b" and f.labels["test"] == "ks")


Story = tuple[DriftCheck, FakeClock, dict[str, np.ndarray], list[Finding]]


@pytest.fixture
def story(tmp_path: Path) -> Story:
    """Feature b: the reference, two blocks shifted by 1 sd, then a quiet block (a stays unshifted)."""
    clock = FakeClock(T0)
    check = _check(tmp_path, clock)
    rng = np.random.default_rng(4)
    data = {"ref_a": rng.normal(size=REF), "ref_b": rng.normal(size=REF)}
    _block(check, clock, data["ref_a"], data["ref_b"], T0 + 60)
    out = []
    for i, shift in enumerate((1.0, 1.0, 0.0)):
        data[f"a{i}"], data[f"b{i}"] = rng.normal(size=400), rng.normal(shift, 1, 400)
        out = _block(check, clock, data[f"a{i}"], data[f"b{i}"], T0 + 120 + 60 * i)
    return check, clock, data, out


def _expected(data: dict[str, np.ndarray], i: int) -> tuple[float, float, float]:
    """(D, raw p, BH-adjusted p) of b's block i, adjusted together with a's."""
    kb, ka = ks_2samp(data["ref_b"], data[f"b{i}"]), ks_2samp(data["ref_a"], data[f"a{i}"])
    return float(kb.statistic), float(kb.pvalue), float(false_discovery_control([kb.pvalue, ka.pvalue])[0])


def test_an_active_finding_carries_the_drifting_blocks_not_the_latest_one(story: Story) -> None:
    _, _, data, findings = story
    f = _b(findings)
    facts = f.facts
    assert f.active and isinstance(facts, DriftFacts)
    assert (facts.decision, facts.scale_secs, facts.looks_drifting, facts.looks) == ("multiscale", 60.0, 2, 3)
    assert [b.end for b in facts.evidence] == [T0 + 120, T0 + 180]
    for blk, i in zip(facts.evidence, (0, 1), strict=True):
        d, p, q = _expected(data, i)
        assert isinstance(blk, DriftBlock) and blk.drifted and (blk.n_cur, blk.n_ref) == (400, REF)
        assert blk.statistic == pytest.approx(d, rel=1e-9) and blk.p_raw == pytest.approx(p, rel=1e-6)
        assert blk.q == pytest.approx(q, rel=1e-6) and blk.q is not None and blk.q < blk.level
    # The latest look (quiet) is "now", and it is what the flat figures and /metrics say.
    d_now, _, q_now = _expected(data, 2)
    assert facts.now is not None and facts.now.end == T0 + 240 and not facts.now.drifted
    assert facts.statistic == pytest.approx(d_now) and facts.q == pytest.approx(q_now, rel=1e-6)
    assert facts.reference is not None and facts.reference.size == REF and facts.reference.source == "pinned:1"
    summary, description = finding_text(f)
    d1 = _expected(data, 1)[0]
    assert f"KS D={d1:.4f}" in summary and "in the 60s block to" in summary and f"D={d_now:.4f}" not in summary
    assert f"Now: KS D={d_now:.4f}" in description and f"Reference {facts.reference.id} (1000 values)" in description


def test_a_finding_that_is_not_active_carries_no_evidence(story: Story) -> None:
    _, _, _, findings = story
    a = next(f for f in findings if f.labels["feature"] == "a" and f.labels["test"] == "ks")
    assert not a.active and isinstance(a.facts, DriftFacts) and a.facts.evidence == ()
    assert "in the 60s block to" not in finding_text(a)[0]


def test_the_evidence_survives_a_restart(story: Story, tmp_path: Path) -> None:
    check, clock, _, findings = story
    before = _b(findings).facts
    assert isinstance(before, DriftFacts) and len(before.evidence) == 2
    check.persist(force=True)
    ctx_of(check).store.close()
    again = _check(tmp_path, clock)  # a fresh process: same store file
    lk = again.multiscale.looks[(("m", "1", "b", "ks"), 60.0)]
    assert [b for b in lk.blocks if b is not None and b.drifted] == list(before.evidence)  # the figures, exactly
    # One more quiet block: the block to T0+120 leaves the last 3, so 1 of 3 drifted and nothing is active.
    rng = np.random.default_rng(9)
    after = _b(_block(again, clock, rng.normal(size=400), rng.normal(size=400), T0 + 300))
    assert not after.active and isinstance(after.facts, DriftFacts) and after.facts.looks_drifting == 1


def test_a_store_row_of_an_older_sidecar_keeps_its_count_without_figures(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    check = _check(tmp_path, clock)
    check.multiscale.load(("m", "1", "b", "ks"), orjson.dumps({"60.0": [T0, [1, 1]]}))
    lk = check.multiscale.looks[(("m", "1", "b", "ks"), 60.0)]
    assert list(lk.bits) == [True, True] and list(lk.blocks) == [None, None]


def test_a_stored_block_keeps_its_own_chi_square_details() -> None:
    import dataclasses

    import orjson

    from sidecar.checks.drift.multiscale import _block, _block_row

    b = DriftBlock(0.0, 60.0, 400, 1000, 199.1, 1.44, 1e-40, 1e-39, 0.002, True, dof=2, unseen="br", unseen_ratio=0.185)
    row = orjson.loads(orjson.dumps(_block_row(b)))
    assert _block(row) == b  # the evidence reads the same words after a restart
    old = dataclasses.replace(b, dof=None, unseen=None, unseen_ratio=None)
    assert _block(row[:10]) == old  # a row stored before blocks had their details still reads
