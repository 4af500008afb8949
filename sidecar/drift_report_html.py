"""``sidecar drift --html FILE``: the offline report as one self-contained HTML file.

The drawings are the drift pages' own: the distributions come from ``numeric_detail`` / ``categorical_detail``
(``sidecar.checks.drift.view``), their geometry from ``sidecar.pages.drift_detail`` and their markup from the
``_drift_plots.html`` macros, rendered by the pages' one Jinja2 environment (autoescape on). The pages' CSS is
inlined and nothing is linked, so the file opens offline and can be attached to a ticket.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from markupsafe import Markup

from sidecar import __version__
from sidecar.checks.drift.references import Reference
from sidecar.checks.drift.view import SeriesDetail, SeriesRow, categorical_detail, numeric_detail
from sidecar.pages.drift_detail import (
    BAR_H,
    BARS_W,
    HEIGHT,
    LABEL_W,
    LEFT,
    PLOT_H,
    PLOT_W,
    TOP,
    WIDTH,
    BarRow,
    EcdfPlot,
    _bar_rows,
    _ecdf_plot,
)
from sidecar.pages.render import render

__all__ = ["render_report", "write_report"]

GEO = {
    "W": WIDTH,
    "H": HEIGHT,
    "L": LEFT,
    "T": TOP,
    "PW": PLOT_W,
    "PH": PLOT_H,
    "BH": BAR_H,
    "LW": LABEL_W,
    "BW": BARS_W,
}


@dataclass(frozen=True)
class FeatureView:
    anchor: str
    row: dict[str, Any]  # the report's row (the same one the text table and --json print)
    d: SeriesDetail | None
    plot: EcdfPlot | None
    bars: list[BarRow]
    bars_h: float
    state: str  # drifting | ok | insufficient (the pages' badge classes)


def _series_row(row: dict[str, Any], kind: str) -> SeriesRow:
    state = "drifting" if row["drift"] else ("ok" if row.get("p") is not None else "insufficient")
    return SeriesRow(
        model="",
        version="",
        feature=row["feature"],
        kind=kind,
        test=row["test"],
        state=state,
        reason="" if row.get("p") is not None else row["verdict"],
        statistic=row.get("statistic"),
        p=row.get("p_adjusted"),
        p_raw=row.get("p"),
        effect=row.get("effect"),
        floor=row.get("floor"),
        psi=row.get("psi"),
        held_secs=None,
        sustained_secs=None,
        evidence="",
        n_cur=row["n_current"],
        n_ref=row["n_reference"],
        missing_cur=row["missing_current"],
        missing_ref=row["missing_reference"],
        missing_state="drifting" if row["missing_drift"] else "ok",
        missing_floor=None,
        unseen_ratio=row.get("unseen_ratio"),
        unseen_count=0,
        new_categories=tuple(row.get("unseen") or ()),
        method="",
        ref_mode="file",
        ref_source="",
        ref_created_at=None,
        ref_offset_secs=None,
        evaluated_at=0.0,
    )


def _feature(i: int, row: dict[str, Any], ref: Reference | None, cur: Reference | None) -> FeatureView:
    series = _series_row(row, ref.kind if ref else (cur.kind if cur else "numeric"))
    state = series.state
    d: SeriesDetail | None = None
    plot: EcdfPlot | None = None
    bars: list[BarRow] = []
    bars_h = 0.0
    if ref is not None and cur is not None and ref.kind == cur.kind:
        if ref.kind == "numeric" and ref.ecdf is not None and cur.ecdf is not None and ref.ecdf.n and cur.ecdf.n:
            d = numeric_detail(series, ref.ecdf, cur.ecdf)
            if d.d_at is not None and d.x_range is not None:
                plot = _ecdf_plot(d)
        elif ref.kind == "categorical" and ref.counts and cur.counts:
            d = categorical_detail(series, ref.counts, cur.counts)
            bars, bars_h, _ = _bar_rows(d)
    return FeatureView(f"f{i}", row, d, plot, bars, bars_h, state)


def render_report(
    rows: list[dict[str, Any]],
    ref: dict[str, Reference],
    cur: dict[str, Reference],
    *,
    reference: str,
    current: str,
    settings: dict[str, Any],
    notes: list[str],
    now: float,
) -> str:
    css = (resources.files("sidecar.pages") / "static" / "pages.css").read_text(encoding="utf-8")
    features = [_feature(i, r, ref.get(r["feature"]), cur.get(r["feature"])) for i, r in enumerate(rows)]
    return render(
        "drift_report.html",
        css=Markup(css),  # our own package file, not input: inlined as it is (a child selector's > must stay)
        features=features,
        reference=reference,
        current=current,
        settings=settings,
        notes=notes,
        drifted=[f.row["feature"] for f in features if f.row["drift"]],
        geo=GEO,
        generated=dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
        version=__version__,
    )


def write_report(path: str | Path, html: str) -> None:
    """Writes the file whole (a partial report is never left behind: written aside, then renamed)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(p)
