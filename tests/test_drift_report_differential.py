"""Differential: on fixed-seed files, the columnar reader gives the offline report exactly the numbers the
row-by-row reader gave (statistic, p, BH-adjusted p, verdict, n and missing ratio per column), for CSV, JSON
Lines and Parquet alike, with and without the seeded subsample of ``--max-rows``.

The expected values were printed by the report at commit e954e57 (the row-by-row CSV reader) on these files.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sidecar.drift_report import main

Row = tuple[str, float, float, float, str, int, int, float]

_CUR: list[Row] = [
    (
        "country",
        668.5235037072589,
        1.4031763022290727e-144,
        7.015881511145363e-144,
        "DRIFT (new: it)",
        12000,
        3000,
        0.0,
    ),
    ("w", 0.022291373053733188, 0.20869024341767747, 0.26086280427209685, "ok", 11294, 2823, 0.059),
    ("x", 0.013166666666666715, 0.7944941640849099, 0.7944941640849099, "ok", 12000, 3000, 0.0),
    ("y", 0.09141666666666665, 6.644863618310515e-18, 1.6612159045776287e-17, "DRIFT", 12000, 3000, 0.0),
    ("z", 0.07683333333333331, 9.067039503588424e-13, 1.5111732505980707e-12, "DRIFT", 12000, 3000, 0.0),
]
_SMALL: list[Row] = [
    ("country", 2.279089749215845, 0.3199646127025434, 0.533274354504239, "ok", 12000, 400, 0.0),
    ("w", 0.06511789351529151, 0.08730191669099414, 0.25872667273540617, "ok", 11294, 376, 0.06),
    ("x", 0.061416666666666675, 0.10349066909416246, 0.25872667273540617, "ok", 12000, 400, 0.0),
    ("y", 0.03383333333333327, 0.7542514739043332, 0.7542514739043332, "ok", 12000, 400, 0.0),
    ("z", 0.03724999999999999, 0.6422090033910096, 0.7542514739043332, "ok", 12000, 400, 0.0),
]
_CUR_5000: list[Row] = [
    (
        "country",
        668.5235037072589,
        1.4031763022290727e-144,
        7.015881511145363e-144,
        "DRIFT (new: it)",
        12000,
        3000,
        0.0,
    ),
    ("w", 0.0279836344314559, 0.11571697560704117, 0.14464621950880147, "ok", 11294, 2823, 0.059),
    ("x", 0.010666666666666666, 0.9819445149176196, 0.9819445149176196, "ok", 12000, 3000, 0.0),
    ("y", 0.0932, 1.2912570192009407e-14, 3.228142548002352e-14, "DRIFT", 12000, 3000, 0.0),
    ("z", 0.07426666666666666, 1.957314635156294e-09, 3.262191058593823e-09, "DRIFT", 12000, 3000, 0.0),
]
CASES = [("cur", [], 1, _CUR), ("small", [], 0, _SMALL), ("cur", ["--max-rows", "5000"], 1, _CUR_5000)]


def _columns(rng: np.random.Generator, n: int, shift: float) -> dict[str, np.ndarray]:
    x = rng.normal(0.0, 1.0, n)
    y = rng.normal(shift, 1.0, n)
    z = rng.exponential(1.0 + shift, n)
    w = np.round(rng.normal(10, 3, n), 2)
    w[::17] = np.nan
    cats, p = (["de", "fr", "es", "it"], [0.5, 0.3, 0.15, 0.05]) if shift else (["de", "fr", "es"], [0.5, 0.35, 0.15])
    return {"x": x, "y": y, "z": z, "w": w, "country": rng.choice(cats, n, p=p)}


def _value(v: object) -> object:
    v = v.item() if isinstance(v, np.generic) else v
    return None if isinstance(v, float) and np.isnan(v) else v


def _write(tmp: Path) -> None:
    """12,000 reference rows (KS asymptotic), a shifted current file of 3,000 and a small one of 400 (exact p)."""
    rng = np.random.default_rng(20261205)
    files = {"ref": _columns(rng, 12_000, 0.0), "cur": _columns(rng, 3_000, 0.2), "small": _columns(rng, 400, 0.0)}
    for tag, d in files.items():
        names, n = list(d), len(d["x"])
        rows = [{k: _value(d[k][i]) for k in names} for i in range(n)]
        cell = lambda v: "" if v is None else (repr(v) if isinstance(v, float) else str(v))  # noqa: E731
        lines = [",".join(names)] + [",".join(cell(r[k]) for k in names) for r in rows]
        (tmp / f"{tag}.csv").write_text("\n".join(lines) + "\n")
        (tmp / f"{tag}.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
        pq.write_table(pa.table({k: pa.array(v) for k, v in d.items()}), tmp / f"{tag}.parquet")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("differential")
    _write(tmp)
    return tmp


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("current, extra, rc, expected", CASES)
def test_the_report_gives_todays_numbers(
    files: Path, fmt: str, current: str, extra: list[str], rc: int, expected: list[Row]
) -> None:
    out = io.StringIO()
    got_rc = main(
        ["--reference", str(files / f"ref.{fmt}"), "--current", str(files / f"{current}.{fmt}"), "--json", *extra], out
    )
    doc = orjson.loads(out.getvalue())
    got = [
        (
            f["feature"],
            f["statistic"],
            f["p"],
            f["p_adjusted"],
            f["verdict"],
            f["n_reference"],
            f["n_current"],
            f["missing_current"],
        )
        for f in doc["features"]
    ]
    assert got_rc == rc
    assert got == expected  # exact: the same floats, not approximately
