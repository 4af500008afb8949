"""The model probe: a known request sent to each configured model on its interval over Triton's API (the
official ``tritonclient``, injected as a ``ProbeClient``), its answer held to the expected names, shape,
datatype, range and finiteness. ``failures_to_fire`` consecutive failures make the model's finding active
(kind ``probe``, alert ``ModelProbeFailing``).

Probe traffic is marked so the SLI, drift and business paths leave it out: its request id starts with
``sidecar-probe-`` and its W3C ``traceparent`` trace id with ``PROBE_TRACE_PREFIX`` (Triton propagates it onto
its spans). The rate is bounded by a token bucket (``max_per_sec``, all models together); a probe that finds
no token waits for the next tick, counted in ``sidecar_probe_deferred_total``.

A version the actions layer reverted away from is not probed while the revert's hold lasts (``holds``, the layer's
read-only view): the revert unloaded it, so probing it would only fail. Its finding is inactive (an open
ModelProbeFailing resolves) and says so, ``sidecar_probe_held{model,version,action_id}`` is 1 and its
``sidecar_probe_success`` and ``_consecutive_failures`` series are gone; once an operator clears the hold, it is
probed again at the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sidecar.checks.probe.client import ProbeAnswer, ProbeClient, ProbeFailure
from sidecar.checks.probe.config import ProbeModelConfig, ProbeOutput, ProbesConfig
from sidecar.clock import Clock
from sidecar.component import Readiness, Role
from sidecar.facts_actions import ProbeFacts
from sidecar.model import Finding
from sidecar.polled import Polled, TickerFactory
from sidecar.probe_marker import (
    PROBE_HEADER,
    PROBE_REQUEST_PREFIX,
    PROBE_TRACE_PREFIX,
    ProbeLedger,
    is_probe_request,
    is_probe_trace,
)

__all__ = [
    "ALERTNAME",
    "PROBE_HEADER",
    "PROBE_TRACE_PREFIX",
    "HeldVersions",
    "ModelProbe",
    "is_probe_request",
    "is_probe_trace",
]

ALERTNAME = "ModelProbeFailing"
# Failures after which whether Triton counted the request is not known (it may still be running it).
_NOT_KNOWN_TO_TRITON = frozenset({"timeout", "unavailable"})


class HeldVersions(Protocol):
    """The actions layer's holds, read only: model -> (the version a revert holds, the revert's action id)."""

    def held_versions(self) -> Mapping[str, tuple[str, str]]: ...


@dataclass
class _State:
    probes: int = 0
    failures: int = 0
    consecutive: int = 0
    reason: str = ""
    detail: str = ""
    latency_s: float | None = None
    last_at: float | None = None
    last_ok_at: float | None = None
    request_id: str = ""
    next_due: float = 0.0  # monotonic


def _shape_ok(want: Sequence[int], got: Sequence[int]) -> bool:
    return len(want) == len(got) and all(w in (-1, g) for w, g in zip(want, got, strict=True))


def judge(spec: ProbeOutput, answer: ProbeAnswer | None) -> tuple[str, str] | None:
    """(reason, detail) of the first way ``answer`` fails ``spec``; None when it passes."""
    if answer is None:
        return "missing_output", f"output {spec.name} missing from the answer"
    if spec.datatype is not None and answer.datatype != spec.datatype:
        return "dtype", f"{spec.name} is {answer.datatype}, expected {spec.datatype}"
    if spec.shape is not None and not _shape_ok(spec.shape, answer.shape):
        return "shape", f"{spec.name} has shape {list(answer.shape)}, expected {spec.shape}"
    values = np.asarray(answer.values)
    if values.dtype.kind not in "fiub":
        return None
    values = values.astype(np.float64, copy=False)
    finite = np.isfinite(values)
    if spec.finite and not finite.all():
        return "non_finite", f"{spec.name}: {int((~finite).sum())} of {values.size} values are NaN or inf"
    vals = values[finite]
    if vals.size and spec.min is not None and float(vals.min()) < spec.min:
        return "out_of_range", f"{spec.name}: {float(vals.min()):g} below {spec.min:g}"
    if vals.size and spec.max is not None and float(vals.max()) > spec.max:
        return "out_of_range", f"{spec.name}: {float(vals.max()):g} above {spec.max:g}"
    return None


class ModelProbe(Polled):
    name = "probe"
    role = Role.CHECK

    def __init__(
        self,
        cfg: ProbesConfig,
        *,
        client: ProbeClient,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
        ledger: ProbeLedger | None = None,
        holds: HeldVersions | None = None,
    ) -> None:
        self.cfg = cfg
        self.holds = holds
        self._held: dict[tuple[str, str], str] = {}  # (model, version) not probed -> the revert's action id
        self.client = client
        self.ledger = ledger  # what Triton answered or failed of ours, for the SLI deriver to take out
        self.clock = clock
        self._lock = threading.Lock()
        # One state per (model, version) probed: a model lists its versions, or probes the one Triton picks ("").
        self._state: dict[tuple[str, str], _State] = {
            (m, v): _State() for m, mc in cfg.models.items() for v in (mc.versions or [mc.version])
        }
        self._seq = 0
        self._tokens = max(1.0, cfg.max_per_sec)
        self._refilled = clock.monotonic()
        # The ticker only looks at who is due: once a second, so the bucket's tokens spread the probes out.
        tick = min([1.0, cfg.interval_secs, *(m.interval_secs for m in cfg.models.values() if m.interval_secs)])
        super().__init__(interval_secs=tick, registry=registry, logger=logger, ticker=ticker)
        self._requests = Counter(
            "sidecar_probe_requests",
            "Probes sent, by model, version and result (ok, failed).",
            ["model", "version", "result"],
            registry=registry,
        )
        self._failures = Counter(
            "sidecar_probe_failures",
            "Failed probes by model and reason (timeout, unavailable, server_error, missing_output, shape, dtype, "
            "non_finite, out_of_range).",
            ["model", "version", "reason"],
            registry=registry,
        )
        self._latency = Histogram(
            "sidecar_probe_latency_seconds",
            "Time from sending a probe to its answer (failed ones included).",
            ["model", "version"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self._consecutive = Gauge(
            "sidecar_probe_consecutive_failures",
            "Failed probes in a row, by model and version.",
            ["model", "version"],
            registry=registry,
        )
        self._up = Gauge(
            "sidecar_probe_success", "1 when the last probe passed.", ["model", "version"], registry=registry
        )
        self._deferred = Counter(
            "sidecar_probe_deferred",
            "Probes due but not sent this tick: rate_limit (over max_per_sec).",
            ["reason"],
            registry=registry,
        )
        self._deferred.labels("rate_limit")
        self._held_gauge = Gauge(
            "sidecar_probe_held",
            "1 for a version not probed: a revert of the actions layer unloaded it and holds the model elsewhere.",
            ["model", "version", "action_id"],
            registry=registry,
        )

    def _sync_holds(self) -> dict[tuple[str, str], str]:
        """The (model, version)s a hold keeps from being probed: every version of a held model but the one held
        (and "", which Triton resolves to the held one). Entering a hold resets the failure count."""
        holds = self.holds.held_versions() if self.holds is not None else {}
        if not holds and not self._held:
            return {}
        now = {key: holds[key[0]][1] for key in self._state if key[0] in holds and key[1] not in ("", holds[key[0]][0])}
        with self._lock:
            before, self._held = self._held, now
            for key, action_id in before.items():
                if now.get(key) != action_id:
                    self._held_gauge.remove(*key, action_id)
            for key, action_id in now.items():
                if before.get(key) == action_id:
                    continue
                self._state[key].consecutive = 0
                self._held_gauge.labels(*key, action_id).set(1.0)
                for gauge in (self._up, self._consecutive):
                    with contextlib.suppress(KeyError):  # never probed: no series yet
                        gauge.remove(*key)
        return now

    # -- probing -------------------------------------------------------------------------------------------
    def _take_token(self) -> bool:
        now = self.clock.monotonic()
        cap = max(1.0, self.cfg.max_per_sec)
        self._tokens = min(cap, self._tokens + (now - self._refilled) * self.cfg.max_per_sec)
        self._refilled = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    async def poll_once(self) -> None:
        mono = self.clock.monotonic()
        held = self._sync_holds()
        due: list[tuple[str, str]] = []
        for (model, version), st in self._state.items():
            if st.next_due > mono or (model, version) in held:
                continue
            if not self._take_token():
                self._deferred.labels("rate_limit").inc()
                continue
            st.next_due = mono + (self.cfg.models[model].interval_secs or self.cfg.interval_secs)
            due.append((model, version))
        if not due:
            return
        gate = asyncio.Semaphore(self.cfg.max_concurrent)

        async def one(model: str, version: str) -> None:
            async with gate:
                await self.probe(model, version)

        await asyncio.gather(*(one(m, v) for m, v in due))

    def _ids(self, model: str) -> tuple[str, dict[str, str]]:
        self._seq += 1
        request_id = f"{PROBE_REQUEST_PREFIX}{model}-{self._seq}"
        trace = PROBE_TRACE_PREFIX + secrets.token_hex(8)
        return request_id, {"traceparent": f"00-{trace}-{secrets.token_hex(8)}-01", PROBE_HEADER: "1"}

    async def probe(self, model: str, version: str | None = None) -> str:
        """Send one probe to ``model`` (its first configured version unless ``version``) now and record it;
        returns the reason (``ok`` when it passed)."""
        mcfg: ProbeModelConfig = self.cfg.models[model]
        version = (mcfg.versions or [mcfg.version])[0] if version is None else version
        request_id, headers = self._ids(model)
        t0 = self.clock.monotonic()
        reason, detail = "ok", ""
        try:
            answer = await self.client.infer(
                model,
                version,
                mcfg.inputs,
                [o.name for o in mcfg.outputs],
                request_id=request_id,
                headers=headers,
                timeout_secs=mcfg.timeout_secs or self.cfg.timeout_secs,
            )
            for spec in mcfg.outputs:
                bad = judge(spec, answer.get(spec.name))
                if bad is not None:
                    reason, detail = bad
                    break
        except ProbeFailure as exc:
            reason, detail = exc.reason, exc.detail
        latency = max(0.0, self.clock.monotonic() - t0)
        self._record((model, version), reason, detail, latency, request_id)
        return reason

    def _record(self, key: tuple[str, str], reason: str, detail: str, latency: float, request_id: str) -> None:
        now = self.clock.now()
        ok = reason == "ok"
        with self._lock:
            st = self._state[key]
            held = key in self._held  # sent before its hold began: counted, but it says nothing of the hold
            st.probes += 1
            st.consecutive = 0 if ok or held else st.consecutive + 1
            st.failures += 0 if ok else 1
            st.reason, st.detail, st.latency_s, st.last_at, st.request_id = reason, detail, latency, now, request_id
            if ok:
                st.last_ok_at = now
            consecutive = st.consecutive
        if self.ledger is not None and reason not in _NOT_KNOWN_TO_TRITON:
            self.ledger.record(*key, answered=reason != "server_error")
        self._requests.labels(*key, "ok" if ok else "failed").inc()
        if not ok:
            self._failures.labels(*key, reason).inc()
            self.log.info("probe of %s v%s failed (%s): %s", *key, reason, detail)
        self._latency.labels(*key).observe(latency)
        if not held:
            self._consecutive.labels(*key).set(consecutive)
            self._up.labels(*key).set(1.0 if ok else 0.0)

    # -- evaluating ------------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> Sequence[Finding]:
        n = self.cfg.failures_to_fire
        out = []
        held = self._sync_holds()
        with self._lock:
            states = {m: _State(**vars(s)) for m, s in self._state.items()}
        for (model, version), st in states.items():
            facts = ProbeFacts(
                consecutive=st.consecutive,
                failures_to_fire=n,
                reason=st.reason or "none",
                probes=st.probes,
                failures=st.failures,
                runbook=f"{ALERTNAME}.md",
                detail=st.detail,
                latency_s=st.latency_s,
                last_at=st.last_at,
                last_ok_at=st.last_ok_at,
                request_id=st.request_id,
                protocol=self.cfg.protocol,
                held_by=held.get((model, version), ""),
            )
            out.append(
                Finding(
                    check=self.name,
                    kind="probe",
                    labels={"alertname": ALERTNAME, "model": model, "version": version},
                    active=st.consecutive >= n and (model, version) not in held,
                    value=float(st.consecutive),
                    threshold=float(n),
                    severity=self.cfg.severity,
                    evaluated_at=now,
                    insufficient_data=st.probes == 0,
                    for_secs=0.0,
                    facts=facts,
                )
            )
        return out

    def readiness(self) -> Readiness | None:
        return None

    def snapshot(self) -> Mapping[str, Mapping[str, object]]:
        """Per model (``model`` or ``model vN``): the last result (for the benchmark and tests)."""
        with self._lock:
            return {
                f"{m} v{v}" if v else m: {
                    "consecutive": s.consecutive,
                    "reason": s.reason,
                    "last_at": s.last_at,
                    "probes": s.probes,
                    "held_by": self._held.get((m, v), ""),
                }
                for (m, v), s in self._state.items()
            }

    async def shutdown(self) -> None:
        await super().shutdown()
        await self.client.close()
