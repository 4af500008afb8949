"""The quality section of bench_drift.py: detection delays and false alarms, the baseline method and the new one.

Everything goes through the real DriftCheck on a fake clock. Traffic is replayed in bulk with
``DriftCheck.observe_columns`` (one call per feature-column batch at one timestamp; the windows take the
batch as one array), which fills the same windows as one event at a time (tests/checks/test_drift_multiscale.py)
and makes days of 100 events/s affordable. The check is evaluated every 60 s of fake time, as in a service.
"""

from __future__ import annotations

import contextlib
import math
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "helpers"))

from drift_testutil import built_check, ctx_of, make_ctx

from sidecar.checks.drift.check import DriftCheck
from sidecar.checks.drift.config import DriftConfig
from sidecar.checks.drift.multiscale import look_level
from sidecar.clock import FakeClock

EVAL_SECS = 60.0
T0 = 1_700_000_000.0 - 1_700_000_000.0 % 86400  # midnight: the daily cycle starts at phase 0
CATS = np.array(["A", "B", "C"])


def method_cfgs(window_secs: float, sustained_secs: float) -> dict[str, dict[str, Any]]:
    return {
        f"window (baseline: {window_secs:.0f}s window, sustained {sustained_secs:.0f}s)": {
            "method": "window",
            "window_secs": window_secs,
            "sustained_secs": sustained_secs,
        },
        "multiscale (60/300/1800s blocks, 2 of last 3)": {"method": "multiscale"},
    }


@dataclass(frozen=True)
class Change:
    name: str
    expect: tuple[str, str]  # (feature, test) that must be named
    mean: float = 0.0
    sd: float = 1.0
    new_cat: float = 0.0
    nan: float = 0.0


# Windows are saved hourly, not every minute: durability is not what this measures, and serialising every
# window each minute was a large part of a replayed day.
PERSIST = 3600.0


def _check(d: str, cfg: dict[str, Any], reference: dict[str, Any]) -> DriftCheck:
    full = {
        "checks": {
            "drift": {
                "enabled": True,
                "eval_threads": 1,
                "persist_interval_secs": PERSIST,
                "reference": reference,
                **cfg,
            }
        }
    }
    ctx = make_ctx(Path(d) / "s.sqlite", FakeClock(T0), full, registry=CollectorRegistry())
    return built_check(ctx)


def _columns(rng: np.random.Generator, n: int, ch: Change | None) -> dict[str, Any]:
    a = rng.normal(size=n)
    b = rng.normal(size=n)
    cat = CATS[rng.integers(0, 3, size=n)].astype(object)
    if ch is not None:
        a = a * ch.sd + ch.mean
        if ch.nan:
            b[rng.random(n) < ch.nan] = np.nan
        if ch.new_cat:
            cat[rng.random(n) < ch.new_cat] = "NEW"
    return {"a": a, "b": b, "cat": list(cat)}


def delay(cfg: dict[str, Any], seed: int, rate: float, ch: Change, max_secs: float) -> tuple[float | None, bool]:
    """Seconds from the change to the first active finding, and whether exactly the changed one was named."""
    rng = np.random.default_rng(seed)
    batch = 10.0
    # After the pinned reference (5000 events) has frozen, at a random 10-s phase within a minute.
    change_at = math.ceil((5000 / rate + 120) / 60) * 60 + 10 * int(rng.integers(0, 6))
    with tempfile.TemporaryDirectory() as d:
        check = _check(d, cfg, {"mode": "pinned", "pinned_events": 5000})
        clock = ctx_of(check).clock
        assert isinstance(clock, FakeClock)
        try:
            while clock.now() - T0 < change_at + max_secs:
                t = clock.now() - T0
                check.observe_columns(
                    "m", "1", clock.now(), _columns(rng, int(rate * batch), ch if t >= change_at else None)
                )
                clock.advance(batch)
                if (clock.now() - T0) % EVAL_SECS == 0:
                    active = {(f.labels["feature"], f.labels["test"]) for f in check.evaluate(clock.now()) if f.active}
                    if active:
                        if clock.now() - T0 <= change_at:
                            return None, False  # a false alarm before the change
                        return clock.now() - T0 - change_at, active == {ch.expect}
            return None, False
        finally:
            ctx_of(check).store.close()


def _fmt(ds: list[tuple[float | None, bool]]) -> str:
    found = [d for d, _ in ds if d is not None]
    named = sum(1 for d, ok in ds if d is not None and ok)
    missed = len(ds) - len(found)
    if not found:
        return f"{'never':>8s} {'':>8s}  missed {missed}/{len(ds)}"
    return (
        f"{float(np.median(found)):7.0f}s {max(found):7.0f}s  missed {missed}/{len(ds)}, "
        f"named right {named}/{len(found)}"
    )


def _rows() -> list[tuple[str, float, Change]]:
    return [
        ("mean shift 0.1 sd", 100, Change("mean 0.1", ("a", "ks"), mean=0.1)),
        ("mean shift 0.2 sd", 100, Change("mean 0.2", ("a", "ks"), mean=0.2)),
        ("mean shift 0.5 sd", 100, Change("mean 0.5", ("a", "ks"), mean=0.5)),
        ("mean shift 0.2 sd", 10, Change("mean 0.2", ("a", "ks"), mean=0.2)),
        ("mean shift 0.2 sd", 1000, Change("mean 0.2", ("a", "ks"), mean=0.2)),
        ("variance sd x1.5", 100, Change("sd x1.5", ("a", "ks"), sd=1.5)),
        ("new category at 20%", 100, Change("new cat", ("cat", "chi2"), new_cat=0.2)),
        ("NaN rate 0 -> 20%", 100, Change("nan", ("b", "missing"), nan=0.2)),
    ]


def _timed_delay(
    cfg: dict[str, Any], seed: int, rate: float, ch: Change, max_secs: float
) -> tuple[tuple[float | None, bool], float]:
    t0 = time.process_time()
    return delay(cfg, seed, rate, ch, max_secs), time.process_time() - t0


def delays(
    seeds: int,
    seed: int,
    window_secs: float,
    sustained_secs: float,
    only: str | None = None,
    pool: Executor | None = None,
) -> None:
    """Every (row, method, seed) run is independent: with a process pool they run in parallel and the table is
    printed in row order as rows complete."""
    cfgs = method_cfgs(window_secs, sustained_secs)
    max_secs = 2 * window_secs + sustained_secs + 1200
    print(
        f"-- detection delay: change at a random 10-s phase after the pinned reference (5000 events); "
        f"{seeds} seeds ({seed}..{seed + seeds - 1}); evaluation every {EVAL_SECS:.0f}s; median / max delay; "
        f"'named right' = the first active findings are exactly the changed feature and test; a run is "
        f"cut at {max_secs:.0f}s after the change; CPU = seconds of CPU for the row's runs --"
    )
    print(f"{'change':22s} {'events/s':>8s}  {'method':52s} {'median':>8s} {'max':>8s}")
    run = pool if pool is not None else _Inline()
    pending = []
    for label, rate, ch in _rows():
        for mname, cfg in cfgs.items():
            if only is not None and cfg["method"] != only:
                continue
            futs = [run.submit(_timed_delay, cfg, seed + k, rate, ch, max_secs) for k in range(seeds)]
            pending.append((label, rate, mname, futs))
    for label, rate, mname, futs in pending:
        got = [f.result() for f in futs]
        cpu = sum(c for _, c in got)
        print(f"{label:22s} {rate:8.0f}  {mname:52s} {_fmt([d for d, _ in got])}  ({cpu:.0f}s CPU)", flush=True)


class _Inline:
    """The executor interface, run in place (no --jobs)."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        f: Future[Any] = Future()
        f.set_result(fn(*args))
        return f


def false_alarms_header(days: float, offset_days: float) -> None:
    """No-drift traffic: model m (pinned reference) with a normal, a discrete (tied) feature and a 0.05-sd
    shift; model c (rolling reference, the same hours ``offset_days`` earlier) with a +-0.5-sd daily cycle
    and a discrete daily cycle. ``offset_days`` of history are replayed first (model c only, not evaluated)."""
    rate = 100
    print(
        f"-- false alarms: {days:g} replayed days at {rate} events/s per model after {offset_days:g} days of "
        f"history; model m (pinned, 5000 events): a ~ N(0,1), t ~ Poisson(3) (ties), s ~ N(0.05,1) after "
        f"the pin (a trivial shift that must not alert), cat 3 categories; model c (rolling reference "
        f"{offset_days:g} days back): cyc ~ N(0.5 sin(2 pi t/day), 1), tcyc ~ Poisson(3 + sin(2 pi t/day)) --"
    )


def false_alarm_run(mname: str, cfg: dict[str, Any], days: float, offset_days: float, seed: int) -> str:
    """One method's replay of the no-drift days; returns its report lines (run in a worker with --jobs)."""
    rate, batch = 100, 60.0
    out: list[str] = []
    rng = np.random.default_rng(seed)
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as d:
        pinned = _check(d + "", cfg, {"mode": "pinned", "pinned_events": 5000})
        ctx = ctx_of(pinned)
        clock = ctx.clock
        assert isinstance(clock, FakeClock)
        cfg_c = dict(cfg)
        rolling_ctx = make_ctx(
            Path(d) / "c.sqlite",
            clock,
            {
                "checks": {
                    "drift": {
                        "enabled": True,
                        "eval_threads": 1,
                        "persist_interval_secs": PERSIST,
                        **cfg_c,
                        "reference": {"mode": "rolling", "rolling_offset_secs": offset_days * 86400},
                    }
                }
            },
            registry=CollectorRegistry(),
        )
        rolling = built_check(rolling_ctx)
        warm = offset_days * 86400
        evals = alarm_evals = 0
        alarms: dict[str, int] = {}
        first: list[str] = []
        looks: dict[float, list[int]] = {}
        seen: set[tuple[Any, float, float]] = set()
        while clock.now() - T0 < warm + days * 86400:
            t = clock.now() - T0
            step = 600.0 if t < warm - 3600 else batch
            n = int(rate * step)
            phase = 2 * math.pi * (t + step / 2) / 86400
            rolling.observe_columns(
                "c",
                "1",
                clock.now(),
                {
                    "cyc": rng.normal(0.5 * math.sin(phase), 1, n),
                    "tcyc": rng.poisson(3 + math.sin(phase), n).astype(np.float64),
                },
            )
            if t >= warm:
                s_shift = 0.05 if pinned.refs.refs.get(("m", "1", "")) is not None else 0.0
                pinned.observe_columns(
                    "m",
                    "1",
                    clock.now(),
                    {
                        "a": rng.normal(size=n),
                        "t": rng.poisson(3, n).astype(np.float64),
                        "s": rng.normal(s_shift, 1, n),
                        "cat": list(CATS[rng.integers(0, 3, n)]),
                    },
                )
            clock.advance(step)
            if clock.now() - T0 > warm:
                evals += 1
                fs = pinned.evaluate(clock.now()) + rolling.evaluate(clock.now())
                act = [f for f in fs if f.active]
                alarm_evals += bool(act)
                for f in act:
                    name = f"{f.labels['model']}/{f.labels['feature']}/{f.labels['test']}"
                    alarms[name] = alarms.get(name, 0) + 1
                    if len(first) < 5:
                        first.append(f"{name} at day {(clock.now() - T0 - warm) / 86400:.2f}")
                for chk in (pinned, rolling):
                    for (skey, scale), lk in chk.multiscale.looks.items():
                        if (skey, scale, lk.end) in seen or lk.result is None or lk.result.insufficient:
                            continue
                        seen.add((skey, scale, lk.end))
                        if skey[3] != "missing":
                            c = looks.setdefault(scale, [0, 0])
                            c[0] += 1
                            c[1] += int(lk.condition)
        ctx.store.close()
        rolling_ctx.store.close()
    model_days = 2 * days
    # Zero events in T model-days: the one-sided 95% upper bound of a Poisson rate is -ln(0.05)/T ~ 3/T.
    bound = -math.log(0.05) / model_days
    out.append(
        f"{mname}: {evals} evaluations x 2 model/versions x 4 features; evaluations with an active "
        f"finding: {alarm_evals}; false alarms by series: {alarms or 'none'}"
        + (f" (first: {'; '.join(first)})" if first else "")
        + f"  ({time.process_time() - t0:.0f}s CPU)"
    )
    if not alarm_evals:
        out.append(
            f"  -> 0 false alarms in {model_days:g} model/version-days: 95% upper bound on the false-alarm "
            f"rate {bound:.3f} per model/version per day (one in {1 / bound:.1f} days)"
        )
    if looks:
        dc = DriftConfig(method="multiscale")
        out.append(
            "  per-look rejections before the 2-of-3 rule (KS and chi-square series), against the level: "
            + "; ".join(
                f"{s:.0f}s blocks {c[1]}/{c[0]} = {c[1] / max(c[0], 1):.2e} "
                f"(level a={look_level(dc, s):.2e}, BH over each model's features)"
                for s, c in sorted(looks.items())
            )
        )
    return "\n".join(out)


def quality(
    days: float,
    offset_days: float,
    seed: int,
    seeds: int,
    window_secs: float,
    sustained_secs: float,
    skip_false_alarms: bool = False,
    skip_delays: bool = False,
    only: str | None = None,
    jobs: int = 1,
) -> None:
    """Both tables from one run. With ``jobs`` > 1 the independent replays run in worker processes; the
    long false-alarm replays are submitted first so that they overlap the delay rows."""
    dc = DriftConfig(method="multiscale")
    print(
        f"== quality: the real DriftCheck on a fake clock, traffic replayed in bulk (observe_columns, 10-s "
        f"batches for delays, 60-s for the days of false-alarm traffic), evaluated every {EVAL_SECS:.0f}s; "
        f"{jobs} worker process(es) =="
    )
    print(
        f"multiscale budget: {dc.false_alarms_per_day:.4f} expected false alarms per model/version per day, "
        f"split over {len(dc.scales_secs)} scales; per-look levels "
        + ", ".join(f"{s:.0f}s: {look_level(dc, s):.2e}" for s in dc.scales_secs)
        + f"; effect floors KS D >= {dc.ks_effect_floor}, PSI >= {dc.psi_effect_floor}, "
        f"missing +{dc.missing_ratio_increase}",
        flush=True,
    )
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        pool: Executor | None = stack.enter_context(ProcessPoolExecutor(jobs)) if jobs > 1 else None
        run = pool if pool is not None else _Inline()
        fa: list[Future[str]] = []
        if not skip_false_alarms:
            fa = [
                run.submit(false_alarm_run, mname, cfg, days, offset_days, seed)
                for mname, cfg in method_cfgs(window_secs, sustained_secs).items()
                if only is None or cfg["method"] == only
            ]
        if not skip_delays:
            delays(seeds, seed, window_secs, sustained_secs, only, pool)
        if fa:
            false_alarms_header(days, offset_days)
            for f in fa:
                print(f.result(), flush=True)
    print(f"quality section: {time.perf_counter() - t0:.0f}s wall", flush=True)
