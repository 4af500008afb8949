"""``sidecar drift --html FILE``: one self-contained page with the drift pages' drawings and the text report's
verdicts."""

from __future__ import annotations

import html
import io
import re
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "pages"))
from pagetree import parse

from sidecar.drift_report import main


def write_pair(tmp: Path) -> tuple[Path, Path]:
    """Reference and current CSV: two numeric columns (one shifted), a categorical one with a new category, a
    column the current file lacks, one with too few values, and a feature name that is markup."""
    rng = np.random.default_rng(11)
    n = 3000

    def cols(shift: float, new: bool) -> dict[str, list[str]]:
        cats = rng.choice(["de", "fr", "es", "<b>it</b>"] if new else ["de", "fr", "es"], n)
        return {
            "age": [repr(float(v)) for v in rng.normal(40 + 6 * shift, 12, n)],
            "income": [repr(float(v)) for v in rng.normal(50, 9, n)],
            "country": [str(c) for c in cats],
            "<script>alert(1)</script>": [repr(float(v)) for v in rng.normal(size=n)],
            "sparse": [repr(float(v)) if i < 5 else "" for i, v in enumerate(rng.normal(size=n))],
        }

    ref, cur = cols(0.0, False), cols(1.0, True)
    ref["gone"] = [str(i) for i in range(n)]
    paths = []
    for name, d in (("ref.csv", ref), ("cur.csv", cur)):
        names = list(d)
        header = ",".join(f'"{k}"' for k in names)
        body = "\n".join(",".join(f'"{d[k][i]}"' for k in names) for i in range(n))
        (tmp / name).write_text(header + "\n" + body + "\n")
        paths.append(tmp / name)
    return paths[0], paths[1]


def test_the_html_report_is_self_contained_draws_each_feature_and_agrees_with_the_text(tmp_path: Path) -> None:
    ref, cur = write_pair(tmp_path)
    out_html = tmp_path / "report.html"
    text, js = io.StringIO(), io.StringIO()
    rc = main(["--reference", str(ref), "--current", str(cur), "--html", str(out_html)], text, io.StringIO())
    assert rc == 1 and out_html.exists() and not (tmp_path / "report.html.part").exists()
    assert main(["--reference", str(ref), "--current", str(cur), "--json"], js, io.StringIO()) == 1
    rows = {f["feature"]: f for f in orjson.loads(js.getvalue())["features"]}
    page = out_html.read_text()

    # Nothing fetched: no URL of any kind, no external stylesheet or script, the CSS inline.
    assert not re.search(r"https?://", page) and "<link" not in page and "<script" not in page and "src=" not in page
    doc = parse(page)
    assert [n.tag for n in doc.iter() if n.tag == "style"] == ["style"]

    # One section per feature, each with the verdict the text report prints for it.
    sections = [n for n in doc.iter() if n.tag == "section" and "feature" in n.classes]
    assert [s.attrs["data-feature"] for s in sections] == list(rows)
    table = {ln.split()[0]: ln for ln in text.getvalue().splitlines()[1:] if not ln.startswith("note:")}
    for s in sections:
        feature = s.attrs["data-feature"]
        verdict = next(n for n in s.iter() if n.tag == "b" and "v" in n.classes).text()
        assert verdict == rows[feature]["verdict"], feature
        if not feature.startswith("<"):
            assert table[feature].rstrip().endswith(verdict), feature

    # One ECDF per numeric feature with values in both files (too few to test is drawn too), one bar drawing per
    # categorical one, none for a column one file lacks; D is the report's statistic.
    numeric = ["age", "income", "<script>alert(1)</script>", "sparse"]
    assert {f for f, r in rows.items() if r["test"] == "ks"} == set(numeric[:3])
    assert rows["sparse"]["verdict"].startswith("insufficient data") and rows["gone"]["test"] == "-"
    for s in sections:
        f = s.attrs["data-feature"]
        ecdfs = [n for n in s.iter() if n.tag == "svg" and n.attrs.get("id", "").endswith("ecdf")]
        bars = [n for n in s.iter() if n.tag == "svg" and n.attrs.get("id", "").endswith("bars")]
        assert len(ecdfs) == (f in numeric) and len(bars) == (rows[f]["test"] == "chi2"), f
        if ecdfs and rows[f]["statistic"] is not None:
            dline = next(n for n in ecdfs[0].iter() if n.attrs.get("id", "").endswith("d-line"))
            assert abs(float(dline.attrs["data-d"]) - rows[f]["statistic"]) < 1e-12
            curves = [n for n in ecdfs[0].iter() if n.tag == "polyline"]
            assert [c.attrs["class"] for c in curves] == ["ref", "cur"]
    new = [n for n in doc.iter() if n.tag == "g" and "new" in n.classes]
    assert [n.attrs["data-category"] for n in new] == ["<b>it</b>"]  # escaped in the file, itself once parsed
    assert "<b>it</b>" not in page and html.escape("<b>it</b>") in page
    assert "<script>alert(1)</script>" not in page
    ids = [n.attrs["id"] for n in doc.iter() if "id" in n.attrs]
    assert len(ids) == len(set(ids))  # several drawings on one page, no id twice


def test_an_unwritable_html_path_exits_2_with_the_path(tmp_path: Path) -> None:
    ref, cur = write_pair(tmp_path)
    err = io.StringIO()
    bad = tmp_path / "no" / "such" / "dir" / "r.html"
    assert main(["--reference", str(ref), "--current", str(cur), "--html", str(bad)], io.StringIO(), err) == 2
    assert str(bad) in err.getvalue() and "Traceback" not in err.getvalue()


def test_sidecar_drift_html_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sidecar.cli import main as cli

    ref, cur = write_pair(tmp_path)
    out_html = tmp_path / "r.html"
    assert cli(["drift", "--reference", str(ref), "--current", str(cur), "--html", str(out_html)]) == 1
    assert "DRIFT" in capsys.readouterr().out and out_html.read_text().count('class="feature"') == 6
