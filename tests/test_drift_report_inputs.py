"""The offline report never hides a column, validates its arguments, and says what is wrong with which file.

Exit statuses: 0 no drift, 1 drift found, 2 the inputs could not be compared (bad arguments or files).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import orjson
import pytest

from sidecar.drift_report import main


def _csv(path: Path, cols: dict[str, list[object]], *, sep: str = ",", bom: bool = False) -> Path:
    names = list(cols)
    n = len(cols[names[0]])
    lines = [sep.join(names)] + [
        sep.join("" if cols[c][i] is None else str(cols[c][i]) for c in names) for i in range(n)
    ]
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + ("\n".join(lines) + "\n").encode())
    return path


def _normal(seed: int, n: int = 2000, shift: float = 0.0) -> list[object]:
    return [float(x) for x in np.random.default_rng(seed).normal(shift, 1.0, n)]


def _run(*args: str) -> tuple[int, dict[str, object], str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main([*args, "--json"], out, err)
    doc = orjson.loads(out.getvalue()) if out.getvalue() else {}
    return rc, doc, err.getvalue()


def _row(doc: dict[str, object], feature: str) -> dict[str, object]:
    rows = [r for r in doc["features"] if r["feature"] == feature]  # type: ignore[union-attr,index]
    assert rows, f"{feature} missing from the report"
    return rows[0]  # type: ignore[no-any-return]


def test_a_nan_burst_beyond_the_floor_is_a_finding_that_sets_the_exit_status(tmp_path: Path) -> None:
    # Two columns: a one-column CSV row with an empty value is a blank line, which CSV readers skip.
    ref = _csv(tmp_path / "ref.csv", {"x": _normal(1), "id": list(range(2000))})
    vals = _normal(2)
    cur = _csv(
        tmp_path / "cur.csv", {"x": [None if i % 5 == 0 else v for i, v in enumerate(vals)], "id": list(range(2000))}
    )  # 20% of x missing
    rc, doc, _ = _run("--reference", str(ref), "--current", str(cur))
    assert rc == 1
    row = _row(doc, "x")
    assert row["missing_drift"] is True and row["drift"] is True
    assert row["missing_reference"] == 0.0 and abs(row["missing_current"] - 0.2) < 1e-9  # type: ignore[operator]
    # Below the floor it is shown but decides nothing.
    rc, doc, _ = _run("--reference", str(ref), "--current", str(cur), "--missing-increase-floor", "0.5")
    assert rc == 0 and _row(doc, "x")["missing_drift"] is False


def test_every_reference_column_appears_and_one_that_cannot_be_tested_says_why(tmp_path: Path) -> None:
    ref = _csv(tmp_path / "ref.csv", {"a": _normal(1), "gone": _normal(2), "empty": _normal(3)}, bom=True)
    cur = _csv(tmp_path / "cur.csv", {"a": _normal(4), "empty": [None] * 2000})
    rc, doc, _ = _run("--reference", str(ref), "--current", str(cur))
    assert {r["feature"] for r in doc["features"]} == {"a", "gone", "empty"}  # type: ignore[union-attr]
    gone = _row(doc, "gone")
    assert gone["verdict"] == "absent from the current file" and gone["drift"] is True
    empty = _row(doc, "empty")
    assert "no values" in str(empty["verdict"]) and empty["missing_current"] == 1.0
    assert _row(doc, "a")["verdict"] == "ok"  # the BOM did not turn 'a' into '\ufeffa'
    assert rc == 1  # a column missing from the current file is a finding


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--max-rows", "0"], "--max-rows"),
        (["--p-threshold", "5"], "--p-threshold"),
        (["--ks-effect-floor", "-1"], "--ks-effect-floor"),
        (["--columns", "a,nope"], "nope"),
        (["--min-rows", "0"], "--min-rows"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(tmp_path: Path, args: list[str], needle: str) -> None:
    ref = _csv(tmp_path / "ref.csv", {"a": _normal(1)})
    cur = _csv(tmp_path / "cur.csv", {"a": _normal(2)})
    rc, _, err = _run("--reference", str(ref), "--current", str(cur), *args)
    assert rc == 2 and needle in err and "Traceback" not in err


def test_messages_name_the_file_and_what_is_wrong(tmp_path: Path) -> None:
    good = _csv(tmp_path / "good.csv", {"a": _normal(1)})
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header = tmp_path / "header.csv"
    header.write_text("a,b\n")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"a\n\xe9\xe8\n")
    for bad, why in ((empty, "is empty"), (header, "no rows"), (latin, "UTF-8")):
        rc, _, err = _run("--reference", str(good), "--current", str(bad))
        assert rc == 2 and f"current file {bad}" in err and why in err, err
        rc, _, err = _run("--reference", str(bad), "--current", str(good))
        assert rc == 2 and f"reference file {bad}" in err, err


def test_a_semicolon_delimited_file_is_read(tmp_path: Path) -> None:
    ref = _csv(tmp_path / "ref.csv", {"a": _normal(1), "b": _normal(2)})
    cur = _csv(tmp_path / "cur.csv", {"a": _normal(3), "b": _normal(4, shift=1.0)}, sep=";")
    rc, doc, _ = _run("--reference", str(ref), "--current", str(cur))
    assert rc == 1 and _row(doc, "b")["drift"] is True and _row(doc, "a")["drift"] is False


def test_too_few_rows_is_insufficient_data_not_ok(tmp_path: Path) -> None:
    ref = _csv(tmp_path / "ref.csv", {"a": _normal(1)})
    cur = _csv(tmp_path / "cur.csv", {"a": [0.1]})
    rc, doc, _ = _run("--reference", str(ref), "--current", str(cur))
    row = _row(doc, "a")
    assert rc == 0 and str(row["verdict"]).startswith("insufficient data") and row["drift"] is False


def test_the_table_names_the_effect_statistic_and_its_floor(tmp_path: Path) -> None:
    ref = _csv(tmp_path / "ref.csv", {"a": _normal(1), "c": ["x", "y"] * 1000})
    cur = _csv(tmp_path / "cur.csv", {"a": _normal(2), "c": ["x", "y"] * 1000})
    out = io.StringIO()
    assert main(["--reference", str(ref), "--current", str(cur)], out, io.StringIO()) == 0
    head, *lines = out.getvalue().splitlines()
    assert "effect" in head and "floor" in head
    by = {ln.split()[0]: ln for ln in lines if ln.strip()}
    assert "KS D" in by["a"] and "PSI" in by["c"]


def test_help_states_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "0" in text and "1" in text and "2" in text and "exit status" in text.lower()


def test_same_hours_compares_only_the_hours_the_current_file_covers(tmp_path: Path) -> None:
    # A daily cycle: the value is high by day and low by night. The current file covers only 02:00-04:00,
    # so against the whole reference it looks shifted, against the same hours it does not.
    rng = np.random.default_rng(7)
    hours = np.arange(24 * 14 * 60) * 60.0  # 14 days, one row a minute
    hod = (hours // 3600) % 24
    level = np.where((hod >= 8) & (hod < 20), 5.0, 0.0)
    ref = _csv(tmp_path / "ref.csv", {"ts": list(hours), "v": list(level + rng.normal(size=hours.size))})
    night = hours[(hod >= 2) & (hod < 4)][:600] + 86400 * 14
    cur = _csv(tmp_path / "cur.csv", {"ts": list(night), "v": list(rng.normal(size=night.size))})
    rc, doc, _ = _run("--reference", str(ref), "--current", str(cur), "--columns", "v")
    assert rc == 1 and _row(doc, "v")["drift"] is True
    rc, doc, _ = _run(
        "--reference", str(ref), "--current", str(cur), "--columns", "v", "--time-column", "ts", "--same-hours"
    )
    assert rc == 0 and _row(doc, "v")["drift"] is False, doc
