"""``sidecar drift --reference A --current B [--json]``: compare two files offline, before deploying.

Reads Parquet, CSV or JSON Lines; every column present in both files is tested the way the live check tests
it (KS for numeric, chi-square with unseen categories and PSI for categorical, Benjamini-Hochberg across the
columns, an effect floor). Exit status: 0 no drift, 1 drift found, 2 the files could not be compared.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, TextIO

import orjson

from sidecar.checks.references import Reference, load_reference_file
from sidecar.checks.stats import Ecdf, benjamini_hochberg, chi_square, ks_many, psi_numeric

__all__ = ["compare", "main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sidecar drift", description="Compare a current data file with a "
                                                                  "reference file, column by column.")
    p.add_argument("--reference", required=True, help="reference file (.parquet, .csv, .jsonl)")
    p.add_argument("--current", required=True, help="current file (.parquet, .csv, .jsonl)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--p-threshold", type=float, default=0.01, help="BH-adjusted p below which a column "
                                                                     "may drift (default 0.01)")
    p.add_argument("--ks-effect-floor", type=float, default=0.05, help="smallest KS D that counts (0.05)")
    p.add_argument("--psi-effect-floor", type=float, default=0.1, help="smallest PSI that counts (0.1)")
    p.add_argument("--max-rows", type=int, default=5_000_000, help="numeric rows kept per column (seeded "
                                                                   "subsample above)")
    p.add_argument("--columns", default="", help="comma-separated columns to compare (default: all shared)")
    return p


def compare(ref: dict[str, Reference], cur: dict[str, Reference], *, p_threshold: float = 0.01,
            ks_floor: float = 0.05, psi_floor: float = 0.1, workers: int = 2) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    numeric: list[tuple[dict[str, Any], Ecdf, Ecdf]] = []
    for name in sorted(set(ref) & set(cur)):
        r, c = ref[name], cur[name]
        row: dict[str, Any] = {"feature": name, "n_reference": r.n, "n_current": c.n,
                               "missing_reference": r.missing_ratio, "missing_current": c.missing_ratio}
        if r.kind != c.kind:
            row.update(test="-", statistic=None, p=None, effect=None, verdict=f"kind differs ({r.kind} vs "
                                                                              f"{c.kind})")
        elif r.n == 0 or c.n == 0:
            row.update(test="-", statistic=None, p=None, effect=None, verdict="no values")
        elif r.kind == "numeric" and r.ecdf is not None and c.ecdf is not None:
            row.update(test="ks", psi=psi_numeric(r.ecdf, c.ecdf), floor=ks_floor)
            numeric.append((row, r.ecdf, c.ecdf))
        elif r.counts is not None and c.counts is not None:
            cs = chi_square(r.counts, c.counts)
            row.update(test="chi2", statistic=cs.statistic, p=cs.p, effect=cs.psi, psi=cs.psi, floor=psi_floor,
                       unseen=list(cs.unseen_categories), unseen_ratio=cs.unseen_rate)
        rows.append(row)
    if numeric:
        results = ks_many([n[1] for n in numeric], [n[2] for n in numeric], workers=workers)
        for (row, _, _), ks in zip(numeric, results, strict=True):
            row.update(statistic=ks.d, p=ks.p, effect=ks.d)
    tested = [i for i, row in enumerate(rows) if row.get("p") is not None]
    for i, q in zip(tested, benjamini_hochberg([rows[i]["p"] for i in tested]), strict=True):
        row = rows[i]
        row["p_adjusted"] = q
        drift = q < p_threshold and row["effect"] >= row["floor"]
        row["verdict"] = "DRIFT" if drift else ("significant, below effect floor" if q < p_threshold else "ok")
        if row.get("unseen"):
            row["verdict"] += f" (new: {', '.join(row['unseen'])})"
    return rows


def _fmt(v: object, spec: str = ".4g") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def _table(rows: list[dict[str, Any]], out: TextIO) -> None:
    head = ["feature", "test", "statistic", "p (BH)", "effect", "n ref", "n cur", "missing", "verdict"]
    body = [[r["feature"], r["test"], _fmt(r.get("statistic")), _fmt(r.get("p_adjusted")), _fmt(r.get("effect")),
             str(r["n_reference"]), str(r["n_current"]), _fmt(r["missing_current"], ".1%"), r["verdict"]]
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    out.write("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip() + "\n")
    for b in body:
        out.write("  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)).rstrip() + "\n")


def main(argv: list[str], out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    cols = [c.strip() for c in args.columns.split(",") if c.strip()] or None
    try:
        ref = load_reference_file(args.reference, created_at=0.0, max_rows=args.max_rows, columns=cols)
        cur = load_reference_file(args.current, created_at=0.0, max_rows=args.max_rows, columns=cols)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"sidecar drift: {exc}\n")
        return 2
    if not set(ref) & set(cur):
        sys.stderr.write("sidecar drift: the files share no column\n")
        return 2
    rows = compare(ref, cur, p_threshold=args.p_threshold, ks_floor=args.ks_effect_floor,
                   psi_floor=args.psi_effect_floor)
    if args.json:
        doc = {"reference": args.reference, "current": args.current, "p_threshold": args.p_threshold,
               "features": rows, "drift": any(r["verdict"].startswith("DRIFT") for r in rows)}
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        _table(rows, out)
    return 1 if any(r["verdict"].startswith("DRIFT") for r in rows) else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
