"""Parse + derive one Triton-shaped scrape of ~10,000 series, against prometheus_client's own text parser.

    .venv/bin/python bench/bench_triton_parse.py [--series 10000] [--repeat 7]

Baseline: ``prometheus_client.parser.text_string_to_metric_families`` (parse only, materialised to a list).
Ours: ``parse_exposition`` + ``snapshot_models`` + ``Deriver.update`` (the whole per-scrape work), measured cold
(a fresh label cache, as on the first scrape) and warm (the label cache kept, as on every later scrape).
Prints medians and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client.parser import text_string_to_metric_families

from sidecar.processors.derive import Deriver, snapshot_models
from sidecar.promtext import parse_exposition

STAGES = ("request", "queue", "compute_input", "compute_infer", "compute_output")


def triton_exposition(n_series: int, seed_value: int = 0) -> str:
    """Families and label shapes exactly as Triton 2.51 emits them, for as many model versions as needed."""
    per_model = 1 + 4 + 2 + 5 + 1 + len(STAGES) * 6  # success, failure x4, count+exec, durations, pending, summaries
    n_models = max(1, n_series // per_model)
    keys = [(f"model_{i // 3}", str(i % 3 + 1)) for i in range(n_models)]
    out: list[str] = []

    def fam(name: str, typ: str, help_: str, rows: list[str]) -> None:
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {typ}\n")
        out.extend(rows)

    v = seed_value
    fam(
        "nv_inference_request_success",
        "counter",
        "Number of successful inference requests",
        [f'nv_inference_request_success{{model="{m}",version="{ver}"}} {1000 + v}\n' for m, ver in keys],
    )
    fam(
        "nv_inference_request_failure",
        "counter",
        "Number of failed inference requests",
        [
            f'nv_inference_request_failure{{model="{m}",reason="{r}",version="{ver}"}} {v % 7}\n'
            for m, ver in keys
            for r in ("OTHER", "BACKEND", "REJECTED", "CANCELED")
        ],
    )
    for name in ("nv_inference_count", "nv_inference_exec_count"):
        fam(name, "counter", "count", [f'{name}{{model="{m}",version="{ver}"}} {2000 + v}\n' for m, ver in keys])
    for s in STAGES:
        name = f"nv_inference_{s}_duration_us" if s != "request" else "nv_inference_request_duration_us"
        fam(name, "counter", "us", [f'{name}{{model="{m}",version="{ver}"}} {123456 + v}\n' for m, ver in keys])
    fam(
        "nv_inference_pending_request_count",
        "gauge",
        "pending",
        [f'nv_inference_pending_request_count{{model="{m}",version="{ver}"}} 0\n' for m, ver in keys],
    )
    for s in STAGES:
        name = f"nv_inference_{s}_summary_us"
        rows: list[str] = []
        for m, ver in keys:
            rows.append(f'{name}_count{{model="{m}",version="{ver}"}} {1000 + v}\n')
            rows.append(f'{name}_sum{{model="{m}",version="{ver}"}} {99999 + v}\n')
            for q in ("0.5", "0.9", "0.95", "0.99"):
                rows.append(f'{name}{{model="{m}",version="{ver}",quantile="{q}"}} {100 + v}\n')
        fam(name, "summary", "summary", rows)
    fam("nv_cpu_utilization", "gauge", "cpu", ["nv_cpu_utilization 0.25\n"])
    return "".join(out)


def timeit(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    text1 = triton_exposition(args.series, 0)
    text2 = triton_exposition(args.series, 5)
    n = sum(1 for line in text1.splitlines() if line and not line.startswith("#"))

    def baseline() -> None:
        list(text_string_to_metric_families(text1))

    def ours_cold() -> None:
        d = Deriver()
        expo = parse_exposition(text2)
        models, passthrough, _ = snapshot_models(expo, 100_000)
        d.update(models, passthrough, 10.0)

    warm_cache: dict[str, dict[str, str]] = {}
    warm = Deriver()
    m0, p0, _ = snapshot_models(parse_exposition(text1, warm_cache), 100_000)
    warm.update(m0, p0, 0.0)
    t = [5.0]

    def ours_warm() -> None:
        expo = parse_exposition(text2, warm_cache)
        models, passthrough, _ = snapshot_models(expo, 100_000)
        t[0] += 5
        warm.update(models, passthrough, t[0])

    b = timeit(baseline, args.repeat)
    c = timeit(ours_cold, args.repeat)
    w = timeit(ours_warm, args.repeat)
    print(f"series per scrape: {n} ({len(text1) / 1024:.0f} KiB)")
    print(f"prometheus_client text parser (parse only): {b * 1000:8.1f} ms")
    print(f"ours, parse + derive, cold label cache:     {c * 1000:8.1f} ms   ratio {b / c:5.1f}x")
    print(f"ours, parse + derive, warm label cache:     {w * 1000:8.1f} ms   ratio {b / w:5.1f}x")


if __name__ == "__main__":
    main()
