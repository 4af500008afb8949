"""The offline `sidecar drift` report on CSV and JSONL files."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import orjson

from sidecar.drift_report import main


def _write(tmp: Path, name: str, shift: float, new_cat: bool, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    n = 4000
    a, b = rng.normal(size=n), rng.normal(shift, 1.0, size=n)
    cats = rng.choice(["de", "fr", "es"] if new_cat else ["de", "fr"], size=n)
    p = tmp / name
    if name.endswith(".csv"):
        p.write_text("a,b,country\n" + "\n".join(f"{x},{y},{c}" for x, y, c in zip(a, b, cats, strict=True)))
    else:
        p.write_bytes(
            b"\n".join(
                orjson.dumps({"a": float(x), "b": float(y), "country": str(c)})
                for x, y, c in zip(a, b, cats, strict=True)
            )
        )
    return p


def test_report_table_flags_shift_and_new_category(tmp_path: Path) -> None:
    ref = _write(tmp_path, "ref.csv", 0.0, False, 1)
    cur = _write(tmp_path, "cur.jsonl", 0.3, True, 2)
    out = io.StringIO()
    assert main(["--reference", str(ref), "--current", str(cur)], out) == 1
    lines = {ln.split()[0]: ln for ln in out.getvalue().splitlines()[1:]}
    assert "DRIFT" in lines["b"] and "ks" in lines["b"]
    assert "DRIFT" in lines["country"] and "new: es" in lines["country"]
    assert lines["a"].rstrip().endswith("ok")


def test_report_json_and_no_drift(tmp_path: Path) -> None:
    ref = _write(tmp_path, "ref.csv", 0.0, False, 3)
    cur = _write(tmp_path, "cur.csv", 0.0, False, 4)
    out = io.StringIO()
    assert main(["--reference", str(ref), "--current", str(cur), "--json"], out) == 0
    doc = orjson.loads(out.getvalue())
    assert doc["drift"] is False and {f["feature"] for f in doc["features"]} == {"a", "b", "country"}
    assert main(["--reference", str(ref), "--current", str(tmp_path / "missing.csv")], io.StringIO()) == 2
