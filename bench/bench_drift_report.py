"""The offline report (``sidecar drift``) against pandas + scipy on the same files, in one run.

    .venv/bin/python bench/bench_drift_report.py                  # 1,000,000 reference x 1,000,000 current rows
    .venv/bin/python bench/bench_drift_report.py --rows 200000    # a smaller run
    .venv/bin/python bench/bench_drift_report.py --repeat 3       # best of 3 for each side

Files: ``--features`` numeric columns (normal, one shifted by 0.05 sd in the current file) and one categorical
column, written once as CSV and as Parquet into a temporary directory (or ``--dir``). Each side reads both files
and tests every numeric column:

- baseline: ``pandas.read_csv`` / ``pandas.read_parquet``, then ``scipy.stats.ks_2samp`` per numeric column
  (NaN dropped), the way a notebook does it; no categorical test, no BH, no report;
- ours: ``sidecar.drift_report.main([...])`` end to end (read, decide kinds, KS, chi-square, PSI, BH, table).

Printed: seconds for each, the ratio baseline / ours (above 1: ours is faster), and the agreement of D and p
with scipy per column. pandas is not a dependency of the sidecar: ``pip install '.[bench]'`` (or
``pip install pandas``) to run the baseline. Not part of the test suite's pass/fail.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sidecar.drift_report import main as drift_main


def write_files(root: Path, rows: int, features: int, seed: int) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    out: dict[str, Path] = {}
    for tag, shift in (("ref", 0.0), ("cur", 0.05)):
        cols: dict[str, Any] = {
            f"f{i}": rng.normal(shift if i == 0 else 0.0, 1.0, rows).round(6) for i in range(features)
        }
        cols["country"] = np.array(["de", "fr", "es", "it"])[rng.choice(4, rows, p=[0.4, 0.3, 0.2, 0.1])]
        table = pa.table(cols)
        out[f"{tag}.csv"] = root / f"{tag}.csv"
        out[f"{tag}.parquet"] = root / f"{tag}.parquet"
        pacsv.write_csv(table, out[f"{tag}.csv"])
        pq.write_table(table, out[f"{tag}.parquet"])
    return out


def best_of(n: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(n):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def baseline(ref: Path, cur: Path, fmt: str) -> dict[str, tuple[float, float]]:
    import pandas as pd

    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    a, b = read(ref), read(cur)
    out = {}
    for name in a.columns:
        if a[name].dtype.kind == "f":
            r = sps.ks_2samp(a[name].dropna().to_numpy(), b[name].dropna().to_numpy())
            out[name] = (float(r.statistic), float(r.pvalue))
    return out


def ours(ref: Path, cur: Path) -> dict[str, tuple[float, float]]:
    buf = io.StringIO()
    drift_main(["--reference", str(ref), "--current", str(cur), "--json"], buf, io.StringIO())
    doc = orjson.loads(buf.getvalue())
    return {f["feature"]: (f["statistic"], f["p"]) for f in doc["features"] if f["test"] == "ks"}


def run(args: argparse.Namespace, root: Path) -> None:
    try:
        import pandas as pd
    except ImportError:
        pd = None
    t0 = time.perf_counter()
    files = write_files(root, args.rows, args.features, args.seed)
    mib = files["ref.csv"].stat().st_size / 2**20
    print(
        f"{args.rows:,} reference x {args.rows:,} current rows, {args.features} numeric columns + 1 categorical "
        f"(CSV {mib:.0f} MiB each), written in {time.perf_counter() - t0:.1f} s; best of {args.repeat}"
    )
    print(f"{'format':8} {'pandas + scipy':>15} {'ours':>8} {'ratio':>7}   agreement with scipy")
    for fmt in ("csv", "parquet"):
        ref, cur = files[f"ref.{fmt}"], files[f"cur.{fmt}"]
        t_ours, got = best_of(args.repeat, lambda ref=ref, cur=cur: ours(ref, cur))
        if pd is None:
            print(f"{fmt:8} {'-':>15} {t_ours:7.2f}s {'-':>7}   pandas not installed: pip install '.[bench]'")
            continue
        t_base, want = best_of(args.repeat, lambda ref=ref, cur=cur, fmt=fmt: baseline(ref, cur, fmt))
        dd = max(abs(got[k][0] - want[k][0]) for k in want)
        dp = max(abs(got[k][1] - want[k][1]) for k in want)
        print(
            f"{fmt:8} {t_base:14.2f}s {t_ours:7.2f}s {t_base / t_ours:6.2f}x   "
            f"max |dD| {dd:.1e}, max |dp| {dp:.1e} over {len(want)} columns"
        )


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows in each file (1,000,000)")
    ap.add_argument("--features", type=int, default=4, help="numeric columns (4)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side; the best is printed (1)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=None, help="write the files here instead of a temporary directory")
    args = ap.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        run(args, args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="bench_drift_report_") as tmp:
            run(args, Path(tmp))


if __name__ == "__main__":
    cli()
