"""Parquet references and `sidecar drift` on Parquet files (pyarrow writes the files in the test)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from drift_testutil import feed, make_ctx, normal_rows

from sidecar.checks.drift.datafile import load_reference_file
from sidecar.clock import FakeClock
from sidecar.drift_report import main
from sidecar.wiring.drift import drift_check


def _table(seed: int, n: int, shift: float = 0.0, new_cat: bool = False) -> pa.Table:
    rng = np.random.default_rng(seed)
    age = rng.normal(40.0 + shift * 12.0, 12.0, size=n)
    age[::50] = np.nan  # 2% NaN: counted as missing
    clicks = rng.integers(0, 20, size=n)
    cats = ["de", "fr", "es"] if new_cat else ["de", "fr"]
    country: list[str | None] = [str(c) for c in rng.choice(cats, size=n)]
    country[::25] = [None] * len(country[::25])  # 4% null
    return pa.table(
        {
            "age": pa.array(age),
            "clicks": pa.array(clicks, type=pa.int32()),
            "country": pa.array(country, type=pa.string()),
            "flag": pa.array(rng.random(n) < 0.3),
        }
    )


def test_parquet_reference_matches_the_same_data_as_csv(tmp_path: Path) -> None:
    t = _table(1, 3000)
    pq.write_table(t, tmp_path / "ref.parquet", row_group_size=700)  # several row groups and batches
    rows = t.to_pylist()

    def cell(v: object) -> str:
        return (
            "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v) if isinstance(v, bool) else v)
        )

    (tmp_path / "ref.csv").write_text(
        "age,clicks,country,flag\n"
        + "\n".join(",".join(cell(r[k]) for k in ("age", "clicks", "country", "flag")) for r in rows)
    )
    from_pq = load_reference_file(tmp_path / "ref.parquet", created_at=0.0, max_rows=10_000)
    from_csv = load_reference_file(tmp_path / "ref.csv", created_at=0.0, max_rows=10_000)
    assert set(from_pq) == {"age", "clicks", "country", "flag"}
    for name in ("age", "clicks", "flag"):
        a, b = from_pq[name], from_csv[name]
        assert a.kind == b.kind == "numeric" and a.ecdf is not None and b.ecdf is not None
        assert (a.total, a.missing) == (b.total, b.missing)
        assert np.array_equal(a.ecdf.values, b.ecdf.values)
    assert from_pq["age"].missing == 60 and from_pq["age"].ecdf is not None and from_pq["age"].ecdf.n == 2940
    c = from_pq["country"]
    assert c.kind == "categorical" and c.counts == from_csv["country"].counts and c.missing == 120
    assert sum(c.counts.values()) == 2880 and set(c.counts) == {"de", "fr"}
    # A declared kind that does not match the Arrow type falls back to the per-value rules.
    declared = load_reference_file(
        tmp_path / "ref.parquet", created_at=0.0, max_rows=10_000, kinds={"clicks": "categorical"}, columns=["clicks"]
    )
    assert set(declared) == {"clicks"} and declared["clicks"].counts is not None
    assert sum(declared["clicks"].counts.values()) == 3000 and "7" in declared["clicks"].counts


def test_drift_report_on_parquet_files(tmp_path: Path) -> None:
    pq.write_table(_table(2, 4000), tmp_path / "train.parquet")
    pq.write_table(_table(3, 4000, shift=0.3, new_cat=True), tmp_path / "today.parquet")
    pq.write_table(_table(4, 4000), tmp_path / "same.parquet")
    out = io.StringIO()
    assert (
        main(["--reference", str(tmp_path / "train.parquet"), "--current", str(tmp_path / "today.parquet")], out) == 1
    )
    lines = {ln.split()[0]: ln for ln in out.getvalue().splitlines()[1:]}
    assert "DRIFT" in lines["age"] and "ks" in lines["age"]
    assert "DRIFT" in lines["country"] and "new: es" in lines["country"]
    assert lines["clicks"].rstrip().endswith("ok") and lines["flag"].rstrip().endswith("ok")
    out = io.StringIO()
    assert (
        main(
            ["--reference", str(tmp_path / "train.parquet"), "--current", str(tmp_path / "same.parquet"), "--json"], out
        )
        == 0
    )
    doc = orjson.loads(out.getvalue())
    age = next(f for f in doc["features"] if f["feature"] == "age")
    assert doc["drift"] is False and age["n_reference"] == 3920 and age["missing_current"] == pytest.approx(0.02)
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    assert (
        main(
            ["--reference", str(tmp_path / "broken.parquet"), "--current", str(tmp_path / "same.parquet")],
            io.StringIO(),
        )
        == 2
    )


def test_parquet_file_reference_in_the_live_check(tmp_path: Path, clock: FakeClock) -> None:
    rng = np.random.default_rng(9)
    pq.write_table(pa.table({"a": rng.normal(size=5000), "b": rng.normal(size=5000)}), tmp_path / "train.parquet")
    cfg = {
        "checks": {
            "drift": {
                "enabled": True,
                "method": "window",
                "window_secs": 600,
                "sustained_secs": 0,
                "models": {"m": {"reference": {"mode": "file", "path": str(tmp_path / "train.parquet")}}},
            }
        }
    }
    ctx = make_ctx(tmp_path / "state.sqlite", clock, cfg)
    check = drift_check(ctx)
    feed(check, clock, "m", "3", normal_rows(rng, 3000, ["a", "b"], loc={"b": 0.4}), per_sec=10)
    found = check.evaluate(clock.now())
    active = {f.labels["feature"] for f in found if f.active}
    assert active == {"b"}
    refs = {r["feature"]: r for r in check.describe_references()}
    assert refs["a"]["source"] == "file:train.parquet" and refs["a"]["n"] == 5000
