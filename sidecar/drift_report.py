"""``sidecar drift --reference A --current B [--json]``: compare two files offline, before deploying.

Reads Parquet, CSV or JSON Lines; every column of the reference is reported, tested the way the live check
tests it (KS for numeric, chi-square with unseen categories and PSI for categorical, Benjamini-Hochberg across
the columns, an effect floor, a rise of the missing ratio beyond a floor); a column that cannot be tested
says why, and one the current file lacks is a finding. Notes under the table say what the numbers do not: how
many reference rows ``--same-hours`` kept, cells of a numeric column that are not numbers, skipped CSV lines.
``--html FILE`` also writes the report as one self-contained page (``sidecar.drift_report_html``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, TextIO

import orjson

from sidecar.checks.drift.datafile import DataFile, DataFileError, hours_covered, read_data_file
from sidecar.checks.drift.references import Reference
from sidecar.checks.stats.core import Ecdf, benjamini_hochberg, chi_square, ks_many, psi_numeric

__all__ = ["compare", "main"]

EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2
_EPILOG = """exit status:
  0  no drift found
  1  drift found: a column drifted, its missing ratio rose beyond the floor, or it is absent from the
     current file
  2  the inputs could not be compared (bad arguments, unreadable or empty files); the message says which
"""


class _Args(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own errors exit 2 too, with our prefix
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"sidecar drift: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Args(
        prog="sidecar drift",
        description="Compare a current data file with a reference file, column by column.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--reference", required=True, help="reference file (.parquet, .csv, .jsonl)")
    p.add_argument("--current", required=True, help="current file (.parquet, .csv, .jsonl)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--html",
        metavar="FILE",
        default=None,
        help="also write the report as one self-contained HTML file (ECDF and category drawings, no network)",
    )
    p.add_argument(
        "--p-threshold",
        type=float,
        default=0.01,
        help="BH-adjusted p below which a column may drift, in (0, 1) (default 0.01)",
    )
    p.add_argument("--ks-effect-floor", type=float, default=0.05, help="smallest KS D that counts (0.05)")
    p.add_argument("--psi-effect-floor", type=float, default=0.1, help="smallest PSI that counts (0.1)")
    p.add_argument(
        "--missing-increase-floor",
        type=float,
        default=0.1,
        help="a rise of a column's missing/NaN ratio over the reference's by at least this much is "
        "a finding, in (0, 1] (default 0.1, as the live check)",
    )
    p.add_argument(
        "--min-rows",
        type=int,
        default=30,
        help="fewer non-missing values than this in either file is reported as insufficient data (30)",
    )
    p.add_argument(
        "--max-rows", type=int, default=5_000_000, help="numeric rows kept per column (seeded subsample above)"
    )
    p.add_argument("--columns", default="", help="comma-separated columns to compare (default: all)")
    p.add_argument(
        "--time-column",
        default=None,
        help="column holding each row's time (Unix seconds or ISO 8601), for --same-hours",
    )
    p.add_argument(
        "--same-hours",
        action="store_true",
        help="compare against only the reference rows whose UTC hour of day the current file covers "
        "(for data with a daily cycle); needs --time-column",
    )
    return p


def _check_args(a: argparse.Namespace) -> str | None:
    if not 0 < a.p_threshold < 1:
        return f"--p-threshold must be between 0 and 1 (exclusive), not {a.p_threshold}"
    for flag, v in (("--ks-effect-floor", a.ks_effect_floor), ("--psi-effect-floor", a.psi_effect_floor)):
        if not (math.isfinite(v) and v >= 0):
            return f"{flag} must be 0 or more, not {v}"
    if not 0 < a.missing_increase_floor <= 1:
        return f"--missing-increase-floor must be in (0, 1], not {a.missing_increase_floor}"
    if a.min_rows < 1:
        return f"--min-rows must be at least 1, not {a.min_rows}"
    if a.max_rows < 1:
        return f"--max-rows must be at least 1, not {a.max_rows}"
    if a.same_hours and not a.time_column:
        return "--same-hours needs --time-column"
    return None


def _untestable(row: dict[str, Any], verdict: str, drift: bool) -> None:
    row.update(
        test="-", statistic=None, p=None, effect=None, effect_name=None, floor=None, verdict=verdict, drift=drift
    )


def compare(
    ref: dict[str, Reference],
    cur: dict[str, Reference],
    *,
    p_threshold: float = 0.01,
    ks_floor: float = 0.05,
    psi_floor: float = 0.1,
    missing_floor: float = 0.1,
    min_rows: int = 1,
    workers: int = 2,
) -> list[dict[str, Any]]:
    """One row per column of either file (reference columns first, in name order)."""
    rows: list[dict[str, Any]] = []
    numeric: list[tuple[dict[str, Any], Ecdf, Ecdf]] = []
    for name in sorted(ref) + sorted(set(cur) - set(ref)):
        r, c = ref.get(name), cur.get(name)
        row: dict[str, Any] = {
            "feature": name,
            "n_reference": r.n if r else 0,
            "n_current": c.n if c else 0,
            "missing_reference": r.missing_ratio if r else None,
            "missing_current": c.missing_ratio if c else None,
            "missing_drift": False,
        }
        rows.append(row)
        if r is None:
            _untestable(row, "not in the reference", False)
            continue
        if c is None:
            _untestable(row, "absent from the current file", True)
            continue
        rise = c.missing_ratio - r.missing_ratio if c.total and r.total else math.nan
        row["missing_increase"] = None if math.isnan(rise) else rise
        row["missing_drift"] = bool(c.total >= min_rows and not math.isnan(rise) and rise >= missing_floor)
        if r.kind != c.kind and r.n and c.n:
            _untestable(row, f"kind differs ({r.kind} in the reference, {c.kind} now)", True)
        elif r.n == 0 or c.n == 0:
            _untestable(row, f"no values in the {'reference' if r.n == 0 else 'current'} file", False)
        elif r.n < min_rows or c.n < min_rows:
            _untestable(row, f"insufficient data (n={min(r.n, c.n)} < {min_rows})", False)
        elif r.kind == "numeric" and r.ecdf is not None and c.ecdf is not None:
            row.update(test="ks", psi=psi_numeric(r.ecdf, c.ecdf), floor=ks_floor, effect_name="KS D")
            numeric.append((row, r.ecdf, c.ecdf))
        elif r.counts is not None and c.counts is not None:
            cs = chi_square(r.counts, c.counts)
            row.update(
                test="chi2",
                statistic=cs.statistic,
                p=cs.p,
                effect=cs.psi,
                psi=cs.psi,
                floor=psi_floor,
                effect_name="PSI",
                unseen=list(cs.unseen_categories),
                unseen_ratio=cs.unseen_rate,
            )
    if numeric:
        results = ks_many([n[1] for n in numeric], [n[2] for n in numeric], workers=workers)
        for (row, _, _), ks in zip(numeric, results, strict=True):
            row.update(statistic=ks.d, p=ks.p, effect=ks.d)
    tested = [i for i, row in enumerate(rows) if row.get("p") is not None]
    for i, q in zip(tested, benjamini_hochberg([rows[i]["p"] for i in tested]), strict=True):
        row = rows[i]
        row["p_adjusted"] = q
        drift = bool(q < p_threshold and row["effect"] >= row["floor"])
        row["drift"] = drift
        row["verdict"] = "DRIFT" if drift else ("significant, below effect floor" if q < p_threshold else "ok")
        if row.get("unseen"):
            row["verdict"] += f" (new: {', '.join(row['unseen'])})"
    for row in rows:
        row.setdefault("drift", False)
        row.setdefault("verdict", "ok")
        if row["missing_drift"]:
            note = f"MISSING {row['missing_reference']:.1%} -> {row['missing_current']:.1%}"
            row["verdict"] = note if row["verdict"] in ("ok", "-") else f"{row['verdict']}; {note}"
            row["drift"] = True
    return rows


def _fmt(v: object, spec: str = ".4g") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def _table(rows: list[dict[str, Any]], out: TextIO) -> None:
    head = [
        "feature",
        "test",
        "statistic",
        "p (BH)",
        "effect",
        "floor",
        "n ref",
        "n cur",
        "missing ref",
        "missing cur",
        "verdict",
    ]
    body = [
        [
            r["feature"],
            r["test"],
            _fmt(r.get("statistic")),
            _fmt(r.get("p_adjusted")),
            f"{r['effect_name']} {_fmt(r.get('effect'))}" if r.get("effect_name") else "-",
            _fmt(r.get("floor")),
            str(r["n_reference"]),
            str(r["n_current"]),
            _fmt(r["missing_reference"], ".1%"),
            _fmt(r["missing_current"], ".1%"),
            r["verdict"],
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    out.write("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip() + "\n")
    for b in body:
        out.write("  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)).rstrip() + "\n")


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    problem = _check_args(args)
    if problem:
        err.write(f"sidecar drift: {problem}\n")
        return EXIT_ERROR
    cols = [c.strip() for c in args.columns.split(",") if c.strip()] or None
    try:
        hours = hours_covered(args.current, args.time_column) if args.same_hours else None
        common = {"created_at": 0.0, "max_rows": args.max_rows, "columns": cols}
        ref_file = read_data_file(args.reference, role="reference", time_column=args.time_column, hours=hours, **common)
        cur_file = read_data_file(args.current, role="current", **common)
    except DataFileError as exc:
        err.write(f"sidecar drift: {exc}\n")
        return EXIT_ERROR
    ref, cur = ref_file.references(), cur_file.references()
    if args.time_column:  # a clock, not a feature
        ref.pop(args.time_column, None)
        cur.pop(args.time_column, None)
    if cols:
        unknown = [c for c in cols if c not in ref and c not in cur]
        if unknown:
            have = ", ".join(sorted(set(ref) | set(cur))) or "none"
            err.write(
                f"sidecar drift: --columns names {', '.join(unknown)}, which neither file has (they have: {have})\n"
            )
            return EXIT_ERROR
    if not ref:
        err.write(f"sidecar drift: reference file {args.reference}: has no column to compare\n")
        return EXIT_ERROR
    rows = compare(
        ref,
        cur,
        p_threshold=args.p_threshold,
        ks_floor=args.ks_effect_floor,
        psi_floor=args.psi_effect_floor,
        missing_floor=args.missing_increase_floor,
        min_rows=args.min_rows,
    )
    for row in rows:
        for role, f in (("reference", ref_file), ("current", cur_file)):
            c = f.columns.get(row["feature"])
            row[f"non_numeric_{role}"] = c.non_numeric_share if c else None
            row[f"non_numeric_cells_{role}"] = c.non_numeric if c else 0
    drift = any(r["drift"] for r in rows)
    notes = _notes(rows, ref_file, cur_file, args.reference, args.current)
    if args.json:
        doc = {
            "reference": args.reference,
            "current": args.current,
            "p_threshold": args.p_threshold,
            "ks_effect_floor": args.ks_effect_floor,
            "psi_effect_floor": args.psi_effect_floor,
            "missing_increase_floor": args.missing_increase_floor,
            "min_rows": args.min_rows,
            "same_hours": sorted(hours) if hours is not None else None,
            "reference_rows": {
                "read": ref_file.rows_read,
                "kept": ref_file.rows_kept,
                "skipped": ref_file.rows_skipped,
            },
            "current_rows": {"read": cur_file.rows_read, "kept": cur_file.rows_kept, "skipped": cur_file.rows_skipped},
            "notes": notes,
            "features": rows,
            "drift": drift,
        }
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        _table(rows, out)
        for n in notes:
            out.write(f"note: {n}\n")
    if args.html:
        from sidecar.drift_report_html import render_report, write_report

        settings = {
            "p threshold (BH)": args.p_threshold,
            "KS D floor": args.ks_effect_floor,
            "PSI floor": args.psi_effect_floor,
            "missing rise floor": args.missing_increase_floor,
            "min rows": args.min_rows,
        }
        page = render_report(
            rows,
            ref,
            cur,
            reference=args.reference,
            current=args.current,
            settings=settings,
            notes=notes,
            now=time.time(),
        )
        try:
            write_report(args.html, page)
        except OSError as exc:
            err.write(f"sidecar drift: --html {args.html}: cannot be written ({exc.strerror or exc})\n")
            return EXIT_ERROR
    return EXIT_DRIFT if drift else EXIT_OK


def _notes(rows: list[dict[str, Any]], ref: DataFile, cur: DataFile, ref_path: str, cur_path: str) -> list[str]:
    """What the table does not say: the hours filter, cells that are not numbers, skipped lines."""
    notes: list[str] = []
    if ref.hours is not None:
        span = ", ".join(f"{h:02d}" for h in sorted(ref.hours))
        notes.append(
            f"--same-hours: {ref.rows_kept} of {ref.rows_read} reference rows kept "
            f"(UTC hours {span}: those the current file covers)"
        )
    for f, role, path in ((ref, "reference", ref_path), (cur, "current", cur_path)):
        if f.rows_skipped:
            notes.append(
                f"{role} file {path}: {f.rows_skipped} lines skipped (another number of fields than the header)"
            )
    for row in rows:
        for role, f in (("reference", ref), ("current", cur)):
            c = f.columns.get(row["feature"])
            if c is None or not c.non_numeric:
                continue
            share = c.non_numeric_share or 0.0
            if c.reference.kind == "numeric":
                notes.append(
                    f"{row['feature']}: {c.non_numeric} of {c.cells} {role} cells ({share:.2%}) are not numbers; "
                    "counted as missing"
                )
            elif share < 1:
                notes.append(
                    f"{row['feature']}: categorical in the {role} file: {c.non_numeric} of {c.cells} cells "
                    f"({share:.2%}) are not numbers"
                )
    return notes


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
