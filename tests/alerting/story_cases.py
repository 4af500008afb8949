"""One finding of every kind the renderer knows (``sidecar/alerting/render/kinds.py``), built from typed facts, with
the figures and verdict words every screen must quote for it, and, for the kinds that have a line on ``/``, the
gauges the check exports for the same moment (set here to the facts' numbers: the line reads only those).

Used by ``test_one_story_kinds.py``; no fixtures here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge

from sidecar.facts import (
    BatchingFacts,
    BusinessFacts,
    CanaryFacts,
    ColdStartFacts,
    DiagnosisFacts,
    DriftBlock,
    DriftFacts,
    DriftReference,
    OutputSanityFacts,
)
from sidecar.facts_actions import ActionFacts, ProbeFacts
from sidecar.facts_edge import EdgePurgeFacts, EdgeSlaFacts, EdgeTailFacts
from sidecar.facts_llm import GoodputFacts, TokenDriftFacts
from sidecar.model import Finding
from sidecar.pages.edge_line import edge_line
from sidecar.pages.goodput_line import goodput_line
from sidecar.pages.probe_line import probe_line
from sidecar.pages.tokens_line import tokens_line
from sidecar.pages.verdicts_line import verdict_line

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00Z
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@dataclass(frozen=True)
class Case:
    finding: Finding
    figures: tuple[str, ...]  # the verdict and numbers the summary states, on every screen that quotes it
    raw: tuple[str, ...] = ()  # other forms of the same numbers that no screen may show
    line: Callable[[CollectorRegistry], str | None] | None = None  # `/`'s line for the kind
    gauges: Callable[[CollectorRegistry], None] | None = None  # what the check exports at the same moment
    line_figures: tuple[str, ...] = field(default=())  # of ``figures``, those `/`'s line states


def _g(reg: CollectorRegistry, name: str, labels: dict[str, str], value: float) -> None:
    g = Gauge(name, name, list(labels), registry=reg)
    (g.labels(*labels.values()) if labels else g).set(value)


def _finding(
    check: str, kind: str, labels: dict[str, str], value: float | None, facts: object, **kw: object
) -> Finding:
    return Finding(
        check=check,
        kind=kind,
        labels=labels,
        active=True,
        value=value,
        evaluated_at=T0,
        for_secs=0.0,
        facts=facts,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


# ---- the kinds added this round ---------------------------------------------------------------------------------


def goodput_gauges(reg: CollectorRegistry) -> None:
    _g(reg, "sidecar_goodput_objective", {}, 0.99)
    ratio = Gauge("sidecar_goodput_ratio", "r", ["model", "version", "window_secs"], registry=reg)
    for secs, v in (("300", 0.874), ("3600", 0.912), ("1800", 0.95), ("21600", 0.981)):
        ratio.labels("chat", "3", secs).set(v)
    _g(reg, "sidecar_goodput_condition", {"model": "chat", "version": "3"}, 1)


GOODPUT = Case(
    _finding(
        "goodput_burn",
        "goodput",
        {"model": "chat", "version": "3"},
        0.912,
        GoodputFacts(
            objective=0.99,
            good=912,
            requests=1000,
            long_secs=3600,
            short_secs=300,
            factor=14.4,
            min_requests=20,
            runbook="GoodputBurn.md",
            burn_long=8.8,
            burn_short=15.0,
            ttft_ms=500.0,
            inter_token_ms=50.0,
            worst="ttft",
            worst_misses=70,
        ),
        threshold=0.99,
        window_secs=3600,
        trace_id=TRACE,
    ),
    figures=("chat v3", "goodput 91.2%", "burning its 99% objective", "8.8x over 1h", "15x over 5m"),
    raw=("0.912", "91%", "0.99"),
    line=goodput_line,
    gauges=goodput_gauges,
    line_figures=("chat v3", "91.2%", "over 1h", "burning", "99%"),
)

TOKENS = Case(
    _finding(
        "token_length_drift",
        "token_drift",
        {"server": "vllm", "model": "chat", "version": "3", "tokens": "input"},
        0.21,
        TokenDriftFacts(
            tokens="input",
            server="vllm",
            state="tested",
            window_secs=300,
            n_cur=812,
            n_ref=2000,
            min_requests=200,
            level=0.001,
            psi_floor=0.1,
            looks_drifting=2,
            looks=3,
            sustained_looks=2,
            sustained_of=3,
            ref_mode="pinned",
            ref_id="v3",
            runbook="TokenLengthDrift.md",
            statistic=88.4,
            p_raw=1e-9,
            q=2e-9,
            psi=0.21,
            bins=8,
            mean_cur=391.0,
            mean_ref=300.0,
        ),
    ),
    figures=("chat v3 prompt lengths drift on vllm", "mean 391 tokens against 300", "+30%", "PSI 0.21"),
    line=tokens_line,
    gauges=lambda reg: tokens_gauges(reg, psi=0.21),
    line_figures=("chat v3 prompt lengths on vllm drifting", "PSI 0.21", "+30%"),
)


def tokens_gauges(reg: CollectorRegistry, psi: float) -> None:
    lab = {"server": "vllm", "model": "chat", "version": "3", "tokens": "input"}
    _g(reg, "sidecar_token_drift_psi", lab, psi)
    _g(reg, "sidecar_token_drift_drifting", lab, 1)
    mean = Gauge("sidecar_token_drift_mean_tokens", "m", [*lab, "window"], registry=reg)
    mean.labels(*lab.values(), "current").set(391)
    mean.labels(*lab.values(), "reference").set(300)


def probe_gauges(reg: CollectorRegistry) -> None:
    _g(reg, "sidecar_probe_success", {"model": "ctr", "version": "1"}, 0)
    _g(reg, "sidecar_probe_consecutive_failures", {"model": "ctr", "version": "1"}, 3)


PROBE = Case(
    _finding(
        "model_probe",
        "probe",
        {"model": "ctr", "version": "1"},
        3.0,
        ProbeFacts(
            consecutive=3,
            failures_to_fire=3,
            reason="non_finite",
            probes=40,
            failures=3,
            runbook="ModelProbeFailing.md",
            detail="score: 1 of 1 values are NaN or inf",
            latency_s=0.0123,
            request_id="sidecar-probe-ctr-40",
        ),
    ),
    figures=("ctr v1 probe failing: 3 in a row", "NaN or inf"),
    line=probe_line,
    gauges=probe_gauges,
    line_figures=("ctr v1 failing (3 in a row)",),
)

ACTION = Case(
    _finding(
        "action_reload",
        "action",
        {"model": "ctr", "action": "reload"},
        None,
        ActionFacts(
            action="reload",
            outcome="planned",
            plan="POST /v2/repository/models/ctr/load",
            trigger="ModelProbeFailing",
            evidence="ctr v1 probe failing: 3 in a row",
            evidence_at=T0 - 5,
            at=T0,
            action_id="a-1",
            runbook="ActionTaken.md",
        ),
    ),
    figures=("[dry run] would reload ctr", "POST /v2/repository/models/ctr/load", "probe failing: 3 in a row"),
)

SLA = Case(
    _finding(
        "edge_hit_ratio_burn",
        "edge_sla",
        {"route_group": "all"},
        0.914,
        EdgeSlaFacts(
            phase="burn",
            period="day",
            target=0.92,
            ratio=0.914,
            hits=9140,
            requests=10000,
            period_start=T0 - 8 * 3600,
            period_end=T0 + 16 * 3600,
            runbook="EdgeHitRatioBurn.md",
            projected=0.912,
            burn_long=6.8,
            burn_short=7.5,
            long_secs=3600,
            short_secs=300,
            factor=6.0,
        ),
    ),
    figures=("cache hit ratio all burning its SLA", "6.8x over 1h", "91.4% day so far", "projected 91.2%", "92%"),
    raw=("0.914", "0.92", "91%"),
    line=edge_line,
    gauges=lambda reg: edge_gauges(reg, "edge_hit_ratio_burn"),
    line_figures=("all 91.4%", "SLA 92%", "projected 91.2%", "burning its SLA"),
)


def edge_gauges(reg: CollectorRegistry, *firing: str) -> None:
    """The edge checks' gauges with ``firing`` (edge_hit_ratio_burn, tail, purge) firing."""
    _g(reg, "sidecar_edge_hit_ratio_period", {"route_group": "all"}, 0.914)
    _g(reg, "sidecar_edge_hit_ratio_target", {"route_group": "all"}, 0.92)
    _g(reg, "sidecar_edge_hit_ratio_projected", {"route_group": "all"}, 0.912)
    cond = Gauge("sidecar_edge_hit_ratio_condition", "c", ["check", "route_group"], registry=reg)
    cond.labels("edge_hit_ratio_burn", "all").set(1 if "edge_hit_ratio_burn" in firing else 0)
    tail = Gauge("sidecar_edge_tail_condition", "t", ["route_group", "hop"], registry=reg)
    tail.labels("all", "edge").set(1 if "tail" in firing else 0)
    purge = Gauge("sidecar_edge_purge_condition", "p", ["check", "pattern", "scope"], registry=reg)
    purge.labels("edge_purge_not_taken", "/model/weights/v1.3.", "prefix").set(1 if "purge" in firing else 0)


TAIL = Case(
    _finding(
        "edge_tail",
        "edge_tail",
        {"route_group": "all", "hop": "edge"},
        1.2,
        EdgeTailFacts(
            hop="edge",
            reason="ratio",
            requests=20000,
            window_secs=300,
            baseline_secs=3600,
            min_requests=1000,
            runbook="EdgeTailLatency.md",
            p50=0.012,
            p99=0.071,
            p999=1.2,
            base_requests=240000,
            base_p50=0.013,
            base_p99=0.08,
            base_p999=0.52,
            max_ratio=2.0,
        ),
    ),
    figures=("edge p99.9 all 2.3x baseline", "520 ms -> 1.2 s", "while p99 improved 80 ms -> 71 ms"),
    line=edge_line,
    gauges=lambda reg: edge_gauges(reg, "tail"),
    line_figures=("p99.9 tail firing: all edge",),
)

PURGE = Case(
    _finding(
        "edge_purge_not_taken",
        "edge_purge",
        {"pattern": "/model/weights/v1.3."},
        37.0,
        EdgePurgeFacts(
            phase="hits",
            pattern="/model/weights/v1.3.",
            scope="prefix",
            who="ops",
            purged_at=T0 - 4 * 3600,  # 04:00Z
            change_id="c-1",
            runbook="EdgePurgeNotTaken.md",
            hits=37,
            paths=1,
            top_path="/model/weights/v1.3.7-onnx",
            top_hits=37,
            first_hit_at=T0 - 3 * 3600,
        ),
    ),
    figures=("purge of /model/weights/v1.3. at 04:00 did not take", "37 hits on /model/weights/v1.3.7-onnx"),
    line=edge_line,
    gauges=lambda reg: edge_gauges(reg, "purge"),
    line_figures=("purge did not take: /model/weights/v1.3.",),
)

# ---- the kinds before ---------------------------------------------------------------------------------------------

DRIFT_BLOCK = DriftBlock(T0 - 60, T0, 400, 1000, 0.323, 0.323, 1e-30, 3.1e-24, 0.01, True)
DRIFT = Case(
    _finding(
        "drift",
        "drift",
        {"model": "ctr", "version": "2", "feature": "x", "test": "ks"},
        0.323,
        DriftFacts(
            test="ks",
            decision="multiscale",
            floor=0.1,
            condition=True,
            statistic=0.323,
            p_raw=1e-30,
            q=3.1e-24,
            effect=0.323,
            n_cur=400,
            n_ref=1000,
            now=DRIFT_BLOCK,
            evidence=(DRIFT_BLOCK,),
            reference=DriftReference("pinned:2@1", 1000, "pinned:2", T0 - 3600),
            scale_secs=60,
            level=0.01,
            looks_drifting=2,
            looks=3,
            sustained_looks=2,
            sustained_of=3,
        ),
    ),
    figures=("D=0.323", "p(BH)=3.1e-24", "n=400 vs 1000"),
)

BUSINESS = Case(
    _finding(
        "wer_high",
        "business",
        {"model": "asr", "version": "2"},
        0.0912,
        BusinessFacts(
            display_name="WER",
            aggregate="mean",
            compare="absolute",
            direction="up",
            events=500,
            window_secs=300,
        ),
        threshold=0.08,
        window_secs=300,
    ),
    figures=("WER", "0.0912", "0.08"),
)

CANARY = Case(
    _finding(
        "canary",
        "canary",
        {"model": "ctr", "baseline": "1", "candidate": "2"},
        None,
        CanaryFacts(
            "worse",
            "p99",
            "events",
            200,
            0.01,
            3,
            "CanaryVersionWorse.md",
            extra={
                "p99.base": 35.04,
                "p99.cand": 41.26,
                "p99.diff": 0.1775,
                "p99.q": 1e-6,
                "p99.n_base": 500,
                "p99.n_cand": 500,
            },
        ),
        window_secs=600,
    ),
    figures=("worse on p99 by 18%", "v2 41.3 ms vs v1 35 ms", "consider reverting to version 1"),
    raw=("41.26 ms", "35.04 ms"),
)

OUTPUT = Case(
    _finding(
        "output_sanity",
        "output_sanity",
        {"model": "ctr", "version": "2", "test": "collapsed"},
        0.912,
        OutputSanityFacts(
            test="collapsed",
            total=300,
            n=300,
            count=274,
            ratio=0.912,
            outputs="score",
            min_samples=50,
            runbook="ModelOutputSuspect.md",
            dominant="0.5",
            sample_trace_ids=TRACE,
        ),
        threshold=0.9,
        window_secs=300,
        trace_id=TRACE,
    ),
    figures=("ctr v2 outputs collapsed", "0.5 is 91.2% of 300 outputs"),
    raw=("91%", "0.912"),
)

COLD = Case(
    _finding(
        "cold_start_load",
        "cold_start",
        {"model": "ctr", "version": "1"},
        42.0,
        ColdStartFacts(
            phase="loaded", runbook="ColdStartLoad.md", load_secs=42.0, max_load_secs=30.0, lower_bound="no"
        ),
    ),
    figures=("ctr v1", "42"),
    line=verdict_line,
    gauges=lambda reg: (
        Gauge("sidecar_cold_start_condition", "c", ["model", "version", "check"], registry=reg)
        .labels("ctr", "1", "cold_start_load")
        .set(1)
    ),
    line_figures=("ctr v1",),
)

ADVICE = Case(
    _finding(
        "batching_advice",
        "advice",
        {"model": "ctr", "version": "1"},
        None,
        BatchingFacts(
            verdict="enable",
            rate=120.0,
            fill=0.0,
            queue_us=0.0,
            delay_us=None,
            target=8,
            max_batch_size=32,
            suggested_delay_us=500.0,
            requests=36000,
            min_requests=1000,
            runbook="BatchingAdvice.md",
        ),
        window_secs=300,
    ),
    figures=("ctr v1",),
    line=verdict_line,
    gauges=lambda reg: (
        Gauge("sidecar_batching_verdict", "v", ["model", "version", "verdict"], registry=reg)
        .labels("ctr", "1", "enable")
        .set(1)
    ),
    line_figures=("ctr v1: enable dynamic batching",),
)

DIAGNOSIS = Case(
    _finding(
        "diagnose",
        "diagnosis",
        {"diagnosis": "metrics_404"},
        None,
        DiagnosisFacts(
            diagnosis="metrics_404",
            problem="Triton's metrics endpoint answers 404",
            action="start Triton with --allow-metrics=true",
        ),
    ),
    figures=("Triton's metrics endpoint answers 404",),
)

CASES: dict[str, Case] = {
    "action": ACTION,
    "advice": ADVICE,
    "business": BUSINESS,
    "canary": CANARY,
    "cold_start": COLD,
    "diagnosis": DIAGNOSIS,
    "drift": DRIFT,
    "edge_purge": PURGE,
    "edge_sla": SLA,
    "edge_tail": TAIL,
    "goodput": GOODPUT,
    "output_sanity": OUTPUT,
    "probe": PROBE,
    "token_drift": TOKENS,
}
