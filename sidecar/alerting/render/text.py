"""The shape of a finding's words, shared by every kind's renderer (kept apart so the renderers never import
the package that dispatches to them), and the formatters every screen writes numbers and times with: a ratio
as a percentage (``pct``), a moment (``when``), a plain number (``num``). The pages' filters, the ``/`` lines,
the alert annotations and the runbook tables call these, so one figure reads the same on every screen."""

from __future__ import annotations

import datetime as dt
import math

__all__ = ["FindingText", "num", "pct", "when"]

# (summary, description) of one finding.
FindingText = tuple[str, str]


def when(secs: float | None) -> str:
    """A moment as every screen writes it: ``2027-01-15 08:00:00Z`` (UTC, to the second); ``never`` for None."""
    if secs is None:
        return "never"
    return dt.datetime.fromtimestamp(secs, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def pct(ratio: float | None) -> str:
    """A ratio (0..1) as a percentage to three significant digits (``91.2%``), more where three would round a
    ratio below 1 up to ``100%`` (``99.95%``); ``n/a`` for None or NaN. Every screen writes ratios with this,
    so a 91.2% goodput is never 91% or 0.912 on another."""
    if ratio is None or math.isnan(ratio):
        return "n/a"
    for digits in (3, 4, 5, 6):
        text = f"{ratio * 100:.{digits}g}"
        if ratio >= 1 or text != "100":
            break
    return text + "%"


def num(v: object) -> str:
    """A configured or measured number as a person reads it: integers whole, others to at most six
    significant digits (``0.3``, never ``0.30000000000000004``); anything else as its text."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) or (math.isfinite(v) and v == int(v) and abs(v) < 1e15):
        return str(int(v))
    return f"{v:.6g}"
