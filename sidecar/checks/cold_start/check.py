"""Cold-start watch: how long a version takes from LOADING to READY, and how slow its first requests are.

Input: the model-API samples on the bus (``triton_model_state`` and ``triton_model_stats``, see
``sidecar/sources/triton_model_api.py``). A load is timed from the first poll that sees the version LOADING to
the first that sees it READY, so the figure is good to one poll interval (a load shorter than that is not
timed). Triton's statistics of a version restart from zero when it loads, so the cumulative mean once
``first_requests`` requests have succeeded is the mean of (about) its first requests; the steady reference is
the p99 of the per-poll mean latency after them.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from prometheus_client import CollectorRegistry, Gauge

from sidecar.checks.cold_start.config import ColdStartConfig
from sidecar.component import Passive, Role
from sidecar.facts import ColdStartFacts
from sidecar.model import Batch, Finding, Sample

__all__ = ["ColdStartWatch"]

_MAX_VERSIONS = 2000
_HELD_INDEX_SECS = 1.0  # an index request this slow was held by a load (an idle Triton answers in milliseconds)
_SERVING = frozenset({"READY", "LOADING"})


@dataclass
class _Version:
    loading_since: float | None = None
    ready_at: float | None = None
    load_secs: float | None = None
    fresh: bool = False  # its stats count from its load (seen loading, or first seen with few requests)
    count: float | None = None
    ns: float | None = None
    first_mean_s: float | None = None
    first_n: int = 0
    first_at: float = 0.0
    steady: deque[float] = field(default_factory=deque)
    state: str = ""
    lower_bound: bool = False  # load_secs is the time an index request was held, not LOADING-to-READY


def _p99(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.99 * len(s)) - 1)]


class ColdStartWatch(Passive):
    name = "cold_start"
    role = Role.CHECK

    def __init__(self, cfg: ColdStartConfig, *, registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self._lock = threading.Lock()
        self.versions: dict[tuple[str, str], _Version] = {}
        self._batches = 0
        lbl = ["model", "version"]
        self._load = Gauge(
            "sidecar_cold_start_load_seconds",
            "Measured LOADING-to-READY time of a version's last load (good to one poll interval).",
            lbl,
            registry=registry,
        )
        self._ratio = Gauge(
            "sidecar_cold_start_first_requests_slowdown_ratio",
            "Mean latency of a version's first requests over its steady p99 (per-poll means).",
            lbl,
            registry=registry,
        )
        self._condition = Gauge(
            "sidecar_cold_start_condition",
            "1 while a cold-start finding holds (check: cold_start_load, cold_start_first_requests).",
            ["check", *lbl],
            registry=registry,
        )

    # -- observe ---------------------------------------------------------------------------------------------
    def observe(self, batch: Batch) -> None:
        """The model API's polls (kind ``samples``; wiring subscribes this to that source only)."""
        states: dict[tuple[str, str], str] = {}
        stats: dict[tuple[str, str], dict[str, float]] = {}
        index_secs = 0.0
        s: Sample
        for s in batch.items:
            lab = dict(s.labels)
            key = (lab.get("model", ""), lab.get("version", ""))
            if s.name == "triton_model_state":
                states[key] = lab.get("state", "")
            elif s.name == "triton_model_index_seconds":
                index_secs = s.value
            elif s.name == "triton_model_stats":
                stats.setdefault(key, {})[lab.get("stat", "")] = s.value
        with self._lock:
            self._batches += 1
            for key, state in states.items():
                self._on_state(key, state, batch.received_at, index_secs)
            for key, st in stats.items():
                v = self.versions.get(key)
                if v is not None and "success_count" in st and "success_ns" in st:
                    self._on_stats(v, st["success_count"], st["success_ns"], batch.received_at)
            for key in [k for k in self.versions if k not in states]:
                self._forget(key)

    def _on_state(self, key: tuple[str, str], state: str, at: float, index_secs: float) -> None:
        v = self.versions.get(key)
        if v is None:
            if len(self.versions) >= _MAX_VERSIONS:
                return
            v = self.versions[key] = _Version()
            # Already serving when the watch began: its stats do not count from a load we saw.
            v.fresh = self._batches > 1 and state != "READY"
        if state not in _SERVING and v.state in _SERVING:
            # Unloaded: a later READY is a new life, whose load start this poll did not see.
            v = self.versions[key] = _Version(fresh=True)
        elif state == "LOADING" and v.state != "LOADING":
            # A new load: everything measured before belongs to the version's previous life.
            v = self.versions[key] = _Version(loading_since=at, fresh=True)
        elif state == "READY" and v.state != "READY":
            v.ready_at = at
            if v.loading_since is None and self._batches > 1 and index_secs >= _HELD_INDEX_SECS:
                # Never seen LOADING because Triton held our index request for the whole load: the time it was
                # held is the load's time from below.
                v.loading_since, v.fresh, v.lower_bound = at - index_secs, True, True
            if v.loading_since is not None:
                v.load_secs = at - v.loading_since
                self._load.labels(*key).set(v.load_secs)
        v.state = state

    def _on_stats(self, v: _Version, count: float, ns: float, at: float) -> None:
        if v.count is not None and count < v.count:
            v.steady.clear()  # counters restarted: reloaded between two polls
            v.first_mean_s, v.count, v.ns = None, None, None
        if v.count is None and v.first_mean_s is None and v.ready_at is not None and v.loading_since is None:
            # First seen READY after the watch began, with few requests: its stats still count from its load.
            v.fresh = v.fresh or (self._batches > 1 and count < self.cfg.first_requests)
        if v.fresh and v.first_mean_s is None and count >= self.cfg.first_requests:
            v.first_mean_s, v.first_n, v.first_at = ns / count / 1e9, int(count), at
        elif v.first_mean_s is not None and v.count is not None and v.ns is not None and count > v.count:
            v.steady.append((ns - v.ns) / (count - v.count) / 1e9)
            while len(v.steady) > self.cfg.steady_intervals:
                v.steady.popleft()
        v.count, v.ns = count, ns

    def _forget(self, key: tuple[str, str]) -> None:
        self.versions.pop(key, None)
        for g in (self._load, self._ratio):
            with contextlib.suppress(KeyError):
                g.remove(*key)
        for check in ("cold_start_load", "cold_start_first_requests"):
            with contextlib.suppress(KeyError):
                self._condition.remove(check, *key)

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        out: list[Finding] = []
        with self._lock:
            for key, v in self.versions.items():
                if v.state not in _SERVING:
                    continue  # unloaded (or unloading): nothing to say about its last load any more
                labels = {"model": key[0], "version": key[1]}
                load = self._load_finding(v, labels, now)
                if load is not None:
                    out.append(load)
                first = self._first_finding(v, labels, now)
                if first is not None:
                    out.append(first)
        return out

    def _recent(self, v: _Version, now: float) -> bool:
        return v.ready_at is not None and now - v.ready_at <= self.cfg.hold_secs

    def _load_finding(self, v: _Version, labels: dict[str, str], now: float) -> Finding | None:
        bound = self.cfg.max_load_secs
        if v.state == "LOADING" and v.loading_since is not None:
            secs, phase = now - v.loading_since, "loading"
        elif v.load_secs is not None and self._recent(v, now):
            secs, phase = v.load_secs, "loaded"
        else:
            return None
        active = secs > bound
        self._condition.labels("cold_start_load", labels["model"], labels["version"]).set(float(active))
        return Finding(
            check="cold_start_load",
            kind="cold_start",
            labels=labels,
            active=active,
            value=secs,
            threshold=bound,
            severity="warning",
            evaluated_at=now,
            for_secs=0.0,
            facts=ColdStartFacts(
                phase=phase,
                load_secs=secs,
                max_load_secs=bound,
                lower_bound="yes" if v.lower_bound and phase == "loaded" else "no",
                runbook="ColdStartLoad.md",
            ),
        )

    def _first_finding(self, v: _Version, labels: dict[str, str], now: float) -> Finding | None:
        # Held from when the first requests were measured: traffic may reach a version hours after it loaded.
        if v.first_mean_s is None or now - v.first_at > self.cfg.hold_secs:
            return None
        k = self.cfg.slowdown_factor
        facts = ColdStartFacts(
            phase="first_requests",
            first_requests=v.first_n,
            first_mean_s=v.first_mean_s,
            factor=k,
            steady_intervals=len(v.steady),
            runbook="ColdStartFirstRequests.md",
        )
        if len(v.steady) < 3:
            return Finding(
                check="cold_start_first_requests",
                kind="cold_start",
                labels=labels,
                active=False,
                value=v.first_mean_s,
                threshold=k,
                evaluated_at=now,
                insufficient_data=True,
                facts=facts,
            )
        p99 = _p99(list(v.steady))
        ratio = v.first_mean_s / p99 if p99 > 0 else math.inf
        active = ratio > k
        self._ratio.labels(labels["model"], labels["version"]).set(ratio)
        self._condition.labels("cold_start_first_requests", labels["model"], labels["version"]).set(float(active))
        return Finding(
            check="cold_start_first_requests",
            kind="cold_start",
            labels=labels,
            active=active,
            value=v.first_mean_s,
            baseline=p99,
            threshold=k,
            severity="warning",
            evaluated_at=now,
            for_secs=0.0,
            facts=replace(facts, steady_p99_s=p99, ratio=ratio),
        )
