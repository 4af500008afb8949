"""A column's kind is decided from all its cells, and common missing tokens are missing.

Before: the first row decided, so one ``n/a`` in row 1 of a numeric column made it categorical and the verdict
DRIFT "kind differs", while the same cell in row 3 gave ok; ``n/a`` and ``NA`` were categories.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from sidecar.checks.drift.cells import MISSING_TOKENS
from sidecar.checks.drift.datafile import read_data_file
from sidecar.drift_report import main


def _csv(path: Path, cols: dict[str, list[str]]) -> Path:
    names = list(cols)
    rows = zip(*(cols[n] for n in names), strict=True)
    path.write_text(",".join(names) + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
    return path


def _normal(seed: int, n: int = 2000) -> list[str]:
    return [repr(float(v)) for v in np.random.default_rng(seed).normal(size=n)]


def _report(ref: Path, cur: Path, *args: str) -> tuple[int, dict[str, dict[str, object]], dict[str, object]]:
    out = io.StringIO()
    rc = main(["--reference", str(ref), "--current", str(cur), "--json", *args], out, io.StringIO())
    doc = orjson.loads(out.getvalue())
    return rc, {f["feature"]: f for f in doc["features"]}, doc


def _with(cells: list[str], at: int, value: str) -> list[str]:
    return [value if i == at else v for i, v in enumerate(cells)]


def test_na_in_row_1_or_row_3_gives_the_same_verdict(tmp_path: Path) -> None:
    ref = _csv(tmp_path / "ref.csv", {"x": _normal(1), "id": [str(i) for i in range(2000)]})
    cur_vals = _normal(2)
    verdicts = []
    for row in (0, 2):
        cur = _csv(tmp_path / f"cur{row}.csv", {"x": _with(cur_vals, row, "n/a"), "id": [str(i) for i in range(2000)]})
        rc, by, _ = _report(ref, cur, "--columns", "x")
        x = by["x"]
        assert x["test"] == "ks" and x["n_current"] == 1999 and x["missing_current"] == pytest.approx(1 / 2000)
        verdicts.append((rc, x["verdict"], x["statistic"]))
    assert verdicts[0] == verdicts[1] and verdicts[0][1] == "ok"


def test_a_stray_word_in_a_numeric_column_is_counted_not_a_kind_flip(tmp_path: Path) -> None:
    ref = _csv(tmp_path / "ref.csv", {"x": _normal(1)})
    cur = _csv(tmp_path / "cur.csv", {"x": _with(_normal(2), 0, "oops")})
    rc, by, doc = _report(ref, cur)
    x = by["x"]
    assert rc == 0 and x["test"] == "ks" and x["verdict"] == "ok"
    assert x["non_numeric_current"] == pytest.approx(1 / 2000) and x["non_numeric_cells_current"] == 1
    assert x["non_numeric_reference"] == 0.0
    assert x["missing_current"] == pytest.approx(1 / 2000)  # the word is not a number: missing for the test
    assert doc["notes"] == ["x: 1 of 2000 current cells (0.05%) are not numbers; counted as missing"]
    text = io.StringIO()
    main(["--reference", str(ref), "--current", str(cur)], text, io.StringIO())
    assert "note: x: 1 of 2000 current cells (0.05%) are not numbers" in text.getvalue()


def test_every_missing_token_is_missing_not_a_category(tmp_path: Path) -> None:
    vals = _normal(3, 200)
    cells = [MISSING_TOKENS[i % len(MISSING_TOKENS)] if i % 4 == 0 else v for i, v in enumerate(vals)]
    cats = ["NA" if i % 5 == 0 else ("de" if i % 2 else "fr") for i in range(200)]
    path = _csv(tmp_path / "f.csv", {"x": cells, "country": cats})
    f = read_data_file(path, created_at=0.0, max_rows=10_000)
    x, country = f.columns["x"].reference, f.columns["country"].reference
    assert x.kind == "numeric" and x.missing == 50 and x.ecdf is not None and x.ecdf.n == 150
    assert country.kind == "categorical" and country.missing == 40 and set(country.counts or {}) == {"de", "fr"}


def test_the_same_tokens_are_missing_in_json_lines_and_parquet_strings(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cats = ["de", "NA", "fr", "n/a", None, "null"]
    pq.write_table(pa.table({"c": pa.array(cats, type=pa.string())}), tmp_path / "f.parquet")
    (tmp_path / "f.jsonl").write_bytes(b"\n".join(orjson.dumps({"c": c}) for c in cats))
    for name in ("f.parquet", "f.jsonl"):
        ref = read_data_file(tmp_path / name, created_at=0.0, max_rows=100).columns["c"].reference
        assert ref.kind == "categorical" and ref.missing == 4 and ref.counts == {"de": 1, "fr": 1}, name


def test_a_mostly_text_column_is_categorical_with_its_numbers_as_categories(tmp_path: Path) -> None:
    codes = ["A" if i % 10 == 0 else str(i % 3) for i in range(300)]  # 10% text: more than 5%
    f = read_data_file(_csv(tmp_path / "f.csv", {"code": codes}), created_at=0.0, max_rows=1000)
    col = f.columns["code"]
    assert col.reference.kind == "categorical" and col.non_numeric == 30 and col.non_numeric_share == 0.1
    assert col.reference.counts == {"A": 30, "0": 90, "1": 90, "2": 90}


def test_blanks_around_a_number_and_quoted_cells_are_read(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text(
        'x,name\n 1.5 ,"Smith, J"\n2,"a ""quoted"" name"\nword,b\n' + "\n".join(f"{i},c" for i in range(40))
    )
    f = read_data_file(path, created_at=0.0, max_rows=1000)
    x = f.columns["x"]
    assert x.reference.kind == "numeric" and x.non_numeric == 1 and x.reference.ecdf is not None
    assert 1.5 in x.reference.ecdf.values.tolist() and x.reference.ecdf.n == 42
    assert {"Smith, J", 'a "quoted" name'} <= set(f.columns["name"].reference.counts or {})


def test_a_line_with_another_number_of_fields_is_skipped_and_said(tmp_path: Path) -> None:
    good = _normal(4, 100)
    path = tmp_path / "cur.csv"
    path.write_text(
        "x,y\n" + "\n".join(f"{v},{v}" for v in good[:50]) + "\n1,2,3\n" + "\n".join(f"{v},{v}" for v in good[50:])
    )
    ref = _csv(tmp_path / "ref.csv", {"x": good, "y": good})
    _, by, doc = _report(ref, path)
    assert by["x"]["n_current"] == 100 and doc["current_rows"] == {"read": 100, "kept": 100, "skipped": 1}
    assert any("1 lines skipped" in n for n in doc["notes"])  # type: ignore[union-attr]


def test_the_table_says_how_many_reference_rows_same_hours_kept(tmp_path: Path) -> None:
    ts = [str(h * 3600 + 60) for h in range(48)]  # two days, one row an hour
    ref = _csv(tmp_path / "ref.csv", {"ts": ts, "v": _normal(5, 48)})
    cur = _csv(tmp_path / "cur.csv", {"ts": [str(2 * 86400 + 3 * 3600 + i) for i in range(40)], "v": _normal(6, 40)})
    out = io.StringIO()
    main(
        ["--reference", str(ref), "--current", str(cur), "--time-column", "ts", "--same-hours", "--min-rows", "1"], out
    )
    notes = [ln for ln in out.getvalue().splitlines() if ln.startswith("note:")]
    assert notes == ["note: --same-hours: 2 of 48 reference rows kept (UTC hours 03: those the current file covers)"]
    _, by, doc = _report(ref, cur, "--time-column", "ts", "--same-hours", "--min-rows", "1")
    assert by["v"]["n_reference"] == 2 and doc["reference_rows"] == {"read": 48, "kept": 2, "skipped": 0}


def test_dates_and_booleans_stay_the_text_they_are(tmp_path: Path) -> None:
    # The reader converts numbers itself; what it would take for a date or a boolean is read again as text.
    path = _csv(
        tmp_path / "f.csv",
        {
            "day": ["2026-12-0" + str(1 + i % 3) for i in range(60)],
            "flag": ["true" if i % 3 else "false" for i in range(60)],
            "n": [str(i) for i in range(60)],
        },
    )
    f = read_data_file(path, created_at=0.0, max_rows=1000)
    assert f.columns["day"].reference.counts == {"2026-12-01": 20, "2026-12-02": 20, "2026-12-03": 20}
    assert f.columns["flag"].reference.counts == {"true": 40, "false": 20}
    assert f.columns["n"].reference.kind == "numeric"
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\n" + b"".join(b"%d,ok\n" % i for i in range(50)) + b"1,\xe9t\xe9\n")
    err = io.StringIO()
    assert main(["--reference", str(path), "--current", str(bad)], io.StringIO(), err) == 2
    assert f"current file {bad}: is not UTF-8 text" in err.getvalue()


def test_same_hours_reads_iso_times_in_csv_and_timestamps_in_parquet(tmp_path: Path) -> None:
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sidecar.checks.drift.datafile import hours_covered

    iso = _csv(
        tmp_path / "iso.csv",
        {"ts": [f"2026-12-0{1 + i % 3}T0{i % 4}:30:00Z" for i in range(40)], "v": [str(i) for i in range(40)]},
    )
    assert hours_covered(iso, "ts") == frozenset({0, 1, 2, 3})
    f = read_data_file(iso, created_at=0.0, max_rows=100, time_column="ts", hours=frozenset({1}))
    assert (f.rows_read, f.rows_kept, f.columns["v"].reference.n) == (40, 10, 10)
    ts = [dt.datetime(2026, 12, 1 + h // 24, h % 24) for h in range(48)]  # no zone: UTC
    pq.write_table(pa.table({"ts": pa.array(ts, type=pa.timestamp("us")), "v": list(range(48))}), tmp_path / "t.pq")
    assert hours_covered(tmp_path / "t.pq", "ts") == frozenset(range(24))
    f = read_data_file(tmp_path / "t.pq", created_at=0.0, max_rows=100, time_column="ts", hours=frozenset({1, 2}))
    assert (f.rows_read, f.rows_kept) == (48, 4)


def test_without_a_working_pyarrow_the_report_says_so_for_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _csv(tmp_path / "ref.csv", {"x": _normal(1, 50)})
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as a pyarrow built for another numpy: fails at import
    monkeypatch.setitem(sys.modules, "pyarrow.compute", None)
    err = io.StringIO()
    assert main(["--reference", str(ref), "--current", str(ref)], io.StringIO(), err) == 2
    assert f"reference file {ref}: reading data files needs a working pyarrow" in err.getvalue()
