"""Cost of the fleet counters on events ingest: ``POST /v1/events`` with the fleet bins and business counters on,
against the same service with them off, on the same bodies, in one run (ratio printed).

    .venv/bin/python bench/bench_fleet_bins.py [--features 20] [--rounds 10] [--quick]

Both services are built in this process from ``sidecar.example.yaml`` (drift with a pinned reference, business
checks, Triton, GPU and alerting off), plus a business check on a feature and a fraud-score p95 (quantile) check,
so every counter kind is fed: ``checks.fleet.enabled`` is the only difference. Each request goes through the
endpoint's real handler (guard, decode, door checks, bus fan-out to every subscriber: the columnar path when
the body has the common shape, as here), timed as process CPU time. A warm-up (not timed) freezes the pinned
references, so the fleet bins bin every value; bodies alternate off/on so a busy spell on the shared machine
hits both alike; each "on" round includes binning what the fleet bins kept for later (a scrape's work). The
requirement (docs/fleet.md): with the fleet counters on, ingest is at least 90% of off.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml
from prometheus_client import CollectorRegistry
from starlette.requests import Request

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.clock import FakeClock  # noqa: E402
from sidecar.config import parse_config  # noqa: E402
from sidecar.service import Service  # noqa: E402
from sidecar.sources.events.http import EventsEndpoint  # noqa: E402

NOW = 1_800_000_000.0
BATCH = 500
PINNED = 5000


def _service(workdir: Path, fleet: bool) -> tuple[Service, EventsEndpoint]:
    raw = yaml.safe_load((ROOT / "sidecar.example.yaml").read_text())
    raw["store"] = {"path": str(workdir / f"state-{fleet}.sqlite")}
    for off in ("triton", "gpu", "alerting", "traces"):
        raw[off] = {"enabled": False}
    raw["server"] = {"max_body_bytes": 64 * 1024 * 1024}
    checks = raw["checks"]["business"]["checks"]
    checks["f0_mean"] = {"model": "ctr", "field": "features.f0", "aggregate": "mean", "threshold": 100.0}
    checks["score_p95"] = {"field": "score", "aggregate": "quantile", "quantile": 0.95, "threshold": 2.0}
    raw["checks"]["drift"]["reference"]["pinned_events"] = PINNED
    raw["checks"]["fleet"] = {"enabled": fleet}
    svc = Service(parse_config(raw), clock=FakeClock(NOW), registry=CollectorRegistry())
    return svc, next(c for c in svc.components if isinstance(c, EventsEndpoint))


def _body(rnd: random.Random, features: int) -> bytes:
    events = [
        {
            "model": "ctr",
            "version": "1",
            "timestamp": NOW - rnd.random() * 60,
            "features": {f"f{j}": rnd.gauss(j, 1.0) for j in range(features)},
            "score": rnd.random(),
        }
        for _ in range(BATCH)
    ]
    return orjson.dumps({"events": events})


def _request(body: bytes) -> Request:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/events",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "query_string": b"",
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


def _post(ep: EventsEndpoint, bodies: list[bytes], svc: Service | None = None) -> float:
    """CPU seconds to take ``bodies`` through the endpoint; with ``svc``, and to bin what the fleet bins kept
    for later (what a scrape or the next evaluation would do), so the deferred work is counted too."""

    async def go() -> float:
        t0 = time.process_time()
        for b in bodies:
            r = await ep.handle(_request(b))
            assert r.status_code == 200, r.body
        if svc is not None:
            svc.component("fleet").snapshot()
        return time.process_time() - t0

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--bodies", type=int, default=8, help="bodies of 500 events per round and service")
    ap.add_argument("--quick", action="store_true", help="3 rounds of 4 bodies")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.bodies = 3, 4
    rnd = random.Random(28)
    with tempfile.TemporaryDirectory() as d:
        off, ep_off = _service(Path(d), fleet=False)
        on, ep_on = _service(Path(d), fleet=True)
        try:
            warm = [_body(rnd, a.features) for _ in range(PINNED // BATCH + 2)]
            for svc, ep in ((off, ep_off), (on, ep_on)):
                _post(ep, warm)
                svc.component("drift").evaluate(NOW)  # freezes the pinned references
                if svc is on:
                    svc.component("fleet").evaluate(NOW)
                    svc.component("fleet_business").evaluate(NOW)
            _post(ep_on, warm[:2])
            series = on.registry.get_sample_value("sidecar_fleet_series")
            rates: dict[str, list[float]] = {"off": [], "on": []}
            for _ in range(a.rounds):
                bodies = [_body(rnd, a.features) for _ in range(a.bodies)]
                spent = {"off": 0.0, "on": 0.0}
                for i, body in enumerate(bodies):  # body by body, alternately, so load spikes hit both alike
                    spent["off"] += _post(ep_off, [body])
                    spent["on"] += _post(ep_on, [body], on if i == len(bodies) - 1 else None)
                for name in rates:
                    rates[name].append(a.bodies * BATCH / spent[name])
            unbinned = sum(
                s.value
                for m in on.registry.collect()
                if m.name == "sidecar_fleet_values_unbinned"
                for s in m.samples
                if s.name.endswith("_total")
            )
        finally:
            off.store.close()
            on.store.close()
    r_off, r_on = statistics.median(rates["off"]), statistics.median(rates["on"])
    print(f"{BATCH} events x {a.features} numeric features + score per body, {a.rounds} rounds x {a.bodies} bodies")
    print(f"fleet series binned: {series:.0f}; values not binned in the timed rounds' service: {unbinned:.0f}")
    print(f"events ingest, fleet off: {r_off:,.0f} events/s (median of rounds, CPU time)")
    print(f"events ingest, fleet on:  {r_on:,.0f} events/s")
    per_round = [x / y for x, y in zip(rates["on"], rates["off"], strict=True)]
    print(f"ratio on/off: {r_on / r_off:.3f} (per round {min(per_round):.3f} to {max(per_round):.3f})")


if __name__ == "__main__":
    main()
