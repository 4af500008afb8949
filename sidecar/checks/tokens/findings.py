"""A token-length drift finding from one direction's latest look (numbers only; the words are
``sidecar/alerting/render/tokens.py``'s)."""

from __future__ import annotations

from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.tokens.config import TokensConfig
from sidecar.checks.tokens.hist import edges_text
from sidecar.checks.tokens.reference import TokenReference
from sidecar.checks.tokens.series import Direction, Look, SeriesKey
from sidecar.facts_llm import TokenDriftFacts
from sidecar.model import Finding

__all__ = ["CHECK", "KIND", "RUNBOOK", "finding"]

CHECK = "token_length_drift"  # alert TokenLengthDrift (sidecar.naming.camel_alertname)
KIND = "token_drift"
RUNBOOK = "TokenLengthDrift.md"


def _num(v: float | None) -> float | None:
    return None if v is None or v != v else float(v)


def finding(
    cfg: TokensConfig,
    budget: DriftConfig,
    level: float,
    key: SeriesKey,
    tokens: str,
    look: Look,
    dr: Direction,
    ref: TokenReference | None,
    active: bool,
    now: float,
) -> Finding:
    server, model, version = key
    spec = cfg.models.get(model, cfg.reference)
    facts = TokenDriftFacts(
        tokens=tokens,
        server=server,
        state=look.state,
        window_secs=cfg.window_secs,
        n_cur=look.n_cur,
        n_ref=look.n_ref,
        min_requests=cfg.min_requests,
        level=level,
        psi_floor=cfg.psi_effect_floor,
        looks_drifting=sum(dr.looks),
        looks=len(dr.looks),
        sustained_looks=budget.sustained_looks,
        sustained_of=budget.sustained_of,
        ref_mode=ref.mode if ref is not None else spec.mode,
        ref_id=ref.id if ref is not None else "",
        runbook=RUNBOOK,
        pinned_requests=spec.pinned_requests,
        statistic=_num(look.statistic),
        p_raw=_num(look.p),
        q=_num(look.q),
        psi=_num(look.psi),
        bins=look.bins,
        mean_cur=_num(look.mean_cur),
        mean_ref=_num(look.mean_ref),
        ref_edges=edges_text(look.ref_edges),
        cur_edges=edges_text(look.cur_edges),
    )
    return Finding(
        check=CHECK,
        kind=KIND,
        labels={"model": model, "version": version, "server": server, "tokens": tokens},
        active=active,
        value=_num(look.psi),
        threshold=cfg.psi_effect_floor,
        baseline=_num(look.mean_ref),
        p_value=_num(look.q),
        effect_size=_num(look.psi),
        window_secs=cfg.window_secs,
        severity="warning",
        evaluated_at=now,
        insufficient_data=not active and look.state != "tested",
        for_secs=0.0,  # the sustain rule (k of the last n windows) is the hold
        facts=facts,
    )
