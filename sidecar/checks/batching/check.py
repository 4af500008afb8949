"""Batching advisor: is ``max_queue_delay_microseconds`` too long or too short for the traffic, and what to try.

Input: the model-API samples on the bus (``triton_model_stats`` counters and ``triton_model_config`` fields, see
``sidecar/sources/triton_model_api.py``). Over ``window_secs`` of counter increases, per version:
rate (inferences/s), fill (inferences per execution), mean queue time, and from the config the delay D, the
max batch size and the largest preferred size (the target). With arrivals at rate r a wait of D gathers about
r x D more requests, which gives the verdicts:

- ``enable``: dynamic batching is off, but within the accepted wait (``max_suggested_delay_us``) requests
  would batch (r x that wait >= 1).
- ``saturated``: requests queue far longer than D (over 3 x D): the instances are busy, the delay is not the
  cause; more instances (or a bigger GPU share) would help, not a different delay.
- ``too_long``: requests wait (queue time >= D/2) yet even the accepted wait would not gather one more request
  (r x max wait < 1), or D is above the accepted wait: lower it.
- ``too_short``: batches stay under the target and a longer wait, within the accepted one, would gather at
  least one more request: raise D to about (target - 1) / r.
- ``ok`` otherwise; ``insufficient`` with fewer than ``min_requests`` in the window.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge

from sidecar.checks.batching.config import BatchingConfig
from sidecar.component import Passive, Role
from sidecar.facts import BatchingFacts
from sidecar.model import Batch, Finding, Sample

__all__ = ["Advice", "BatchingAdvisor", "advise"]

_MAX_VERSIONS = 2000
_MAX_POINTS = 1000
_STATS = ("inference_count", "execution_count", "queue_count", "queue_ns")
VERDICTS = ("ok", "enable", "saturated", "too_long", "too_short", "insufficient", "not_batchable")
_ACTIVE = frozenset({"enable", "saturated", "too_long", "too_short"})


@dataclass(frozen=True)
class Advice:
    verdict: str
    rate: float
    fill: float
    queue_us: float
    delay_us: float | None
    target: int
    max_batch_size: int
    suggested_delay_us: float | None
    requests: int


def advise(
    *,
    requests: float,
    executions: float,
    queue_count: float,
    queue_ns: float,
    secs: float,
    max_batch_size: int,
    dynamic: bool,
    delay_us: float | None,
    preferred: int | None,
    max_wait_us: float,
    min_requests: int,
) -> Advice:
    """The verdict for one version's window of counter increases and its config (pure: unit-tested alone)."""
    rate = requests / secs if secs > 0 else 0.0
    fill = requests / executions if executions > 0 else 0.0
    queue_us = queue_ns / queue_count / 1000 if queue_count > 0 else 0.0
    target = max(1, min(preferred or max_batch_size, max_batch_size))
    gather_us = (target - 1) / rate * 1e6 if rate > 0 else float("inf")
    suggested: float | None = None
    if max_batch_size <= 1:
        verdict = "not_batchable"
    elif requests < min_requests:
        verdict = "insufficient"
    elif not dynamic:
        reach = rate * max_wait_us / 1e6
        verdict = "enable" if reach >= 1 else "ok"
        suggested = min(max_wait_us, gather_us) if verdict == "enable" else None
    else:
        d = delay_us or 0.0
        reach_max = rate * max_wait_us / 1e6
        if d > 0 and queue_us > 3 * d:
            verdict = "saturated"
        elif d > 0 and queue_us >= d / 2 and (reach_max < 1 or d > max_wait_us):
            verdict = "too_long"
            suggested = 0.0 if reach_max < 1 else min(max_wait_us, gather_us)
        elif fill < target * 0.75 and min(max_wait_us, gather_us) > 1.5 * d and rate * max_wait_us / 1e6 >= 1:
            verdict = "too_short"
            suggested = min(max_wait_us, gather_us)
        else:
            verdict = "ok"
    return Advice(
        verdict,
        rate,
        fill,
        queue_us,
        delay_us if dynamic else None,
        target,
        max_batch_size,
        None if suggested is None else round(suggested),
        int(requests),
    )


@dataclass
class _Series:
    points: deque[tuple[float, dict[str, float]]] = field(default_factory=deque)
    verdict: str | None = None


class BatchingAdvisor(Passive):
    name = "batching"
    role = Role.CHECK

    def __init__(self, cfg: BatchingConfig, *, registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self._lock = threading.Lock()
        self.series: dict[tuple[str, str], _Series] = {}
        self.configs: dict[str, dict[str, float]] = {}
        lbl = ["model", "version"]
        self._verdict = Gauge(
            "sidecar_batching_verdict",
            "1 for the batching advisor's current verdict of a version (ok, enable, saturated, "
            "too_long, too_short, insufficient, not_batchable).",
            [*lbl, "verdict"],
            registry=registry,
        )
        self._suggested = Gauge(
            "sidecar_batching_suggested_delay_microseconds",
            "The max_queue_delay_microseconds the advisor suggests trying.",
            lbl,
            registry=registry,
        )
        self._fill = Gauge(
            "sidecar_batching_fill", "Inferences per execution over the advisor's window.", lbl, registry=registry
        )

    def observe(self, batch: Batch) -> None:
        """The model API's polls (kind ``samples``; wiring subscribes this to that source only)."""
        stats: dict[tuple[str, str], dict[str, float]] = {}
        configs: dict[str, dict[str, float]] = {}
        s: Sample
        for s in batch.items:
            lab = dict(s.labels)
            if s.name == "triton_model_stats" and lab.get("stat") in _STATS:
                stats.setdefault((lab.get("model", ""), lab.get("version", "")), {})[lab["stat"]] = s.value
            elif s.name == "triton_model_config":
                configs.setdefault(lab.get("model", ""), {})[lab.get("field", "")] = s.value
        at = batch.received_at
        with self._lock:
            self.configs.update(configs)
            for key, st in stats.items():
                ser = self.series.get(key)
                if ser is None:
                    if len(self.series) >= _MAX_VERSIONS:
                        continue
                    ser = self.series[key] = _Series()
                if ser.points and any(st.get(k, 0.0) < ser.points[-1][1].get(k, 0.0) for k in _STATS):
                    ser.points.clear()  # counters restarted (the version loaded again)
                ser.points.append((at, st))
                while len(ser.points) > _MAX_POINTS or (
                    len(ser.points) > 2 and at - ser.points[1][0] >= self.cfg.window_secs
                ):
                    ser.points.popleft()
            for key in [k for k in self.series if k not in stats]:
                self._forget(key)
            for model in [m for m in self.configs if m not in {k[0] for k in self.series}]:
                del self.configs[model]

    def _forget(self, key: tuple[str, str]) -> None:
        ser = self.series.pop(key)
        for g in (self._suggested, self._fill):
            with contextlib.suppress(KeyError):
                g.remove(*key)
        if ser.verdict is not None:
            with contextlib.suppress(KeyError):
                self._verdict.remove(*key, ser.verdict)

    def evaluate(self, now: float) -> Sequence[Finding]:
        out = []
        with self._lock:
            for key, ser in self.series.items():
                cfg = self.configs.get(key[0])
                if cfg is None or len(ser.points) < 2:
                    continue
                (t0, a), (t1, b) = ser.points[0], ser.points[-1]
                d = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in _STATS}
                adv = advise(
                    requests=d["inference_count"],
                    executions=d["execution_count"],
                    queue_count=d["queue_count"],
                    queue_ns=d["queue_ns"],
                    secs=t1 - t0,
                    max_batch_size=int(cfg.get("max_batch_size", 0)),
                    dynamic=cfg.get("dynamic_batching", 0.0) > 0,
                    delay_us=cfg.get("max_queue_delay_us"),
                    preferred=int(cfg["preferred_batch_size"]) if "preferred_batch_size" in cfg else None,
                    max_wait_us=self.cfg.max_suggested_delay_us,
                    min_requests=self.cfg.min_requests,
                )
                self._export(key, ser, adv)
                out.append(self._finding(key, adv, t1 - t0, now))
        return out

    def _export(self, key: tuple[str, str], ser: _Series, adv: Advice) -> None:
        if ser.verdict is not None and ser.verdict != adv.verdict:
            with contextlib.suppress(KeyError):
                self._verdict.remove(*key, ser.verdict)
        ser.verdict = adv.verdict
        self._verdict.labels(*key, adv.verdict).set(1.0)
        self._fill.labels(*key).set(adv.fill)
        if adv.suggested_delay_us is None:
            with contextlib.suppress(KeyError):
                self._suggested.remove(*key)
        else:
            self._suggested.labels(*key).set(adv.suggested_delay_us)

    def _finding(self, key: tuple[str, str], adv: Advice, secs: float, now: float) -> Finding:
        return Finding(
            check="batching_advice",
            kind="advice",
            labels={"model": key[0], "version": key[1]},
            active=adv.verdict in _ACTIVE,
            value=adv.delay_us,
            threshold=adv.suggested_delay_us,
            severity="info",
            window_secs=secs,
            evaluated_at=now,
            insufficient_data=adv.verdict == "insufficient",
            for_secs=0.0,
            facts=BatchingFacts(
                verdict=adv.verdict,
                rate=adv.rate,
                fill=adv.fill,
                queue_us=adv.queue_us,
                delay_us=adv.delay_us,
                target=adv.target,
                max_batch_size=adv.max_batch_size,
                suggested_delay_us=adv.suggested_delay_us,
                requests=adv.requests,
                min_requests=self.cfg.min_requests,
                runbook="BatchingAdvice.md",
            ),
        )
