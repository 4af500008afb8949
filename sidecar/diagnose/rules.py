"""The diagnoses, as pure functions of what two probes of Triton (and the span feed) saw.

Each rule returns the diagnoses that hold now, each naming what is wrong and what to do. Interval values
(queue time per request, busy share) come from the counter increases between the previous and the current
probe, so a rule never judges on one scrape's lifetime totals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.observe import Probe
from sidecar.processors.triton_snapshot import Key, ModelSnapshot

__all__ = ["CODES", "RULES", "Diagnosis", "Inputs", "diagnose"]

CODES = ("metrics_404", "no_spans", "gpu_idle_queue", "python_single_instance_busy", "summaries_off")


@dataclass(frozen=True)
class Diagnosis:
    code: str
    problem: str
    action: str
    model: str = ""
    version: str = ""
    facts: dict[str, float | int | str | None] = field(default_factory=dict)

    def line(self) -> str:
        where = f" [{self.model} v{self.version}]" if self.model else ""
        return f"{self.code}{where}: {self.problem}; {self.action}"


@dataclass(frozen=True)
class Inputs:
    prev: Probe | None
    cur: Probe | None
    # Seconds since the last span (or since the sidecar started when none came); None: spans not expected.
    silent_secs: float | None = None


def _delta(cur: ModelSnapshot, prev: ModelSnapshot | None, name: str) -> float:
    new = cur.counters.get(name, 0.0)
    old = prev.counters.get(name, 0.0) if prev is not None else 0.0
    # A restart resets counters: the new total is what happened since.
    return new - old if new >= old else new


def _pairs(i: Inputs) -> list[tuple[Key, ModelSnapshot, ModelSnapshot, float]]:
    if i.cur is None or i.prev is None or not i.cur.ok or not i.prev.ok:
        return []
    dt = i.cur.at - i.prev.at
    if dt <= 0:
        return []
    return [(k, s, i.prev.models[k], dt) for k, s in sorted(i.cur.models.items()) if k in i.prev.models]


def metrics_404(i: Inputs, cfg: DiagnoseConfig) -> list[Diagnosis]:
    if i.cur is None or i.cur.status != 404:
        return []
    return [
        Diagnosis(
            "metrics_404",
            f"metrics endpoint {i.cur.url} answers 404: Triton started without --allow-metrics or with a different "
            "--metrics-port",
            "start Triton with --allow-metrics=true and set triton.metrics_url to http://HOST:<--metrics-port>/metrics "
            "(default port 8002)",
            facts={"status": 404},
        )
    ]


def no_spans(i: Inputs, cfg: DiagnoseConfig) -> list[Diagnosis]:
    if i.silent_secs is None or i.silent_secs < cfg.no_spans_secs:
        return []
    # Without traffic there is nothing to trace; without two good probes there is no evidence of traffic (and
    # a Triton that cannot be probed has diagnoses and alerts of its own).
    if sum(_delta(s, p, "success") for _, s, p, _ in _pairs(i)) <= 0:
        return []
    return [
        Diagnosis(
            "no_spans",
            f"no spans received in {i.silent_secs / 60:.0f} minutes: check --trace-config",
            "start Triton with --trace-config mode=opentelemetry --trace-config opentelemetry,url=http://SIDECAR/"
            "v1/traces --trace-config rate=N (or mode=triton with a trace file the sidecar tails)",
            facts={"silent_secs": round(i.silent_secs, 1)},
        )
    ]


def gpu_idle_queue(i: Inputs, cfg: DiagnoseConfig) -> list[Diagnosis]:
    if i.cur is None or not i.cur.gpu_util:
        return []
    busiest = max(i.cur.gpu_util.values())
    if busiest >= cfg.gpu_idle_ratio:
        return []
    out = []
    for (model, version), s, p, _dt in _pairs(i):
        n = _delta(s, p, "success")
        queue = _delta(s, p, "us_queue") / 1e6 / n if n > 0 else 0.0
        if queue >= cfg.queue_secs or (s.pending or 0) > 0:
            out.append(
                Diagnosis(
                    "gpu_idle_queue",
                    f"GPU idle while requests queue: pre/post-processing or CPU bound (GPU at {busiest:.0%}, "
                    f"mean queue {queue * 1000:.1f} ms, {s.pending or 0:.0f} pending)",
                    "profile the model's input/output handling and the host CPU; move pre/post-processing onto "
                    "the GPU (DALI, an ensemble step) or add CPU instances",
                    model,
                    version,
                    {"gpu_utilization": busiest, "queue_secs": queue, "pending": s.pending},
                )
            )
    return out


def python_single_instance_busy(i: Inputs, cfg: DiagnoseConfig) -> list[Diagnosis]:
    out = []
    configs = i.cur.configs if i.cur is not None else {}
    for (model, version), s, p, dt in _pairs(i):
        info = configs.get(model)
        if info is None or info.backend != "python" or info.instances != 1:
            continue
        compute = sum(_delta(s, p, f) for f in ("us_compute_input", "us_compute_infer", "us_compute_output")) / 1e6
        busy = compute / dt
        n = _delta(s, p, "success")
        queue = _delta(s, p, "us_queue") / 1e6 / n if n > 0 else 0.0
        growing = (s.pending or 0) > (p.pending or 0) or (n > 0 and queue >= compute / n)
        if busy >= cfg.busy_ratio and growing:
            out.append(
                Diagnosis(
                    "python_single_instance_busy",
                    f"Python-backend model busy on one instance while queue grows (busy {busy:.0%} of the time, "
                    f"mean queue {queue * 1000:.1f} ms, {s.pending or 0:.0f} pending)",
                    "raise instance_group count in its config.pbtxt (a Python model runs one request at a time "
                    "per instance)",
                    model,
                    version,
                    {"busy_ratio": round(busy, 3), "queue_secs": queue, "pending": s.pending},
                )
            )
    return out


def summaries_off(i: Inputs, cfg: DiagnoseConfig) -> list[Diagnosis]:
    if i.cur is None or not i.cur.ok:
        return []
    served = [s for s in i.cur.models.values() if s.counters.get("success", 0) > 0]
    if not served or any(s.summary_totals or s.quantiles for s in served):
        return []
    return [
        Diagnosis(
            "summaries_off",
            "Triton summaries off: latency quantiles unavailable (turning them on costs throughput)",
            "start Triton with --metrics-config summary_latencies=true if p50/p99 per stage are worth a few "
            "percent of throughput; the sidecar's span-based latency works without them",
            facts={"models": len(served)},
        )
    ]


RULES: Sequence[Callable[[Inputs, DiagnoseConfig], list[Diagnosis]]] = (
    metrics_404,
    no_spans,
    gpu_idle_queue,
    python_single_instance_busy,
    summaries_off,
)


def diagnose(i: Inputs, cfg: DiagnoseConfig) -> list[Diagnosis]:
    return [d for rule in RULES for d in rule(i, cfg)]
