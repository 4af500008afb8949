"""Cost of the fleet bins on the events path, as a ratio to the drift check's own observe of the same batches.

    .venv/bin/python bench/bench_fleet_bins.py [--events 500] [--features 20] [--rounds 20]

Both take batches of events with numeric features through ``observe`` (file references of 10,000 rows, 20
bins); the figure is microseconds per event and the fleet bins' cost relative to the drift check's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Batch, Event
from sidecar.service import Service


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=500)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    rng = np.random.default_rng(3)
    feats = [f"f{i}" for i in range(a.features)]
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "ref.csv"
        cols = rng.normal(size=(10_000, a.features))
        ref.write_text(",".join(feats) + "\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in cols) + "\n")
        cfg = {
            "store": {"path": str(Path(tmp) / "s.sqlite")},
            "checks": {
                "drift": {"enabled": True, "reference": {"mode": "file", "path": str(ref)}},
                "fleet": {"enabled": True},
            },
        }
        clock = FakeClock()
        svc = Service(parse_config(cfg), registry=CollectorRegistry(), clock=clock)
        drift, fleet = svc.component("drift"), svc.component("fleet")
        batches = [
            Batch(
                kind="events",
                source="bench",
                items=tuple(
                    Event("m", "1", clock.now(), {f: float(v) for f, v in zip(feats, row, strict=True)})
                    for row in rng.normal(size=(a.events, a.features))
                ),
            )
            for _ in range(a.rounds)
        ]
        spent = {}
        for name, comp in (("drift", drift), ("fleet", fleet), ("drift again", drift), ("fleet again", fleet)):
            t0 = time.perf_counter()
            for b in batches:
                comp.observe(b)
            spent[name] = (time.perf_counter() - t0) / (a.events * a.rounds) * 1e6
        svc.store.close()
    d, f = spent["drift again"], spent["fleet again"]
    print(f"{a.events} events x {a.features} numeric features per batch, {a.rounds} batches")
    print(f"drift check observe: {d:.2f} us/event; fleet bins observe: {f:.2f} us/event; ratio {f / d:.2f}")


if __name__ == "__main__":
    main()
