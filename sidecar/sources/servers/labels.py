"""Label strings of the families a profile maps, parsed once per scrape and checked against the limits.

A bucket's ``le`` is split off before parsing, so the bucket lines of one series share one parse; a run of bucket
lines that differ only in ``le`` reuses the first line's labels with a string slice. The common label shape
(``a="x",b="y"``, no escapes) is read in one regular-expression pass; anything else goes to
``promtext.parse_labels``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sidecar.promtext import Exposition

__all__ = ["Chunk", "Limits", "Sample", "SeriesLabels", "resolve_buckets"]


@dataclass(frozen=True, slots=True)
class Limits:
    max_models: int = 500
    max_labels: int = 16  # labels on one sample
    max_label_value_len: int = 256


_PLAIN = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')


def _plain_labels(raw: str) -> dict[str, str] | None:
    """The common case, ``a="x",b="y"`` with no escapes, spaces or trailing comma, in one C-level pass; None for
    anything else (the full parser, ``promtext.parse_labels``, reads it)."""
    if "\\" in raw:
        return None
    pairs = _PLAIN.findall(raw)
    if sum(len(k) + len(v) + 4 for k, v in pairs) - 1 != len(raw):
        return None  # something between or around the pairs: not the plain shape
    return dict(pairs)


_LE = re.compile(r'(^|,)[ \t]*le[ \t]*=[ \t]*"([^"\\]*)"[ \t]*(,|$)')


class SeriesLabels:
    """Label strings parsed once per scrape and checked against the limits. A bucket's ``le`` is split off before
    parsing, so the hundreds of bucket lines of one series share one parse (``le`` values are cached too)."""

    def __init__(self, expo: Exposition, limits: Limits) -> None:
        self._parse = expo.labels
        self._limits = limits
        self.seen: dict[str, dict[str, str] | str] = {}  # raw -> labels, or the problem
        self.les: dict[str, float] = {}
        self.buckets_seen: dict[str, tuple[dict[str, str] | str, float]] = {}

    def get(self, raw: str) -> dict[str, str] | str:
        got = self.seen.get(raw)
        if got is None:
            got = self.seen[raw] = self._resolve(raw)
        return got

    def _resolve(self, raw: str) -> dict[str, str] | str:
        if not raw:
            return {}
        labels = _plain_labels(raw)
        if labels is None:
            try:
                labels = self._parse(raw)
            except ValueError:
                return "a malformed label set"
        lim = self._limits
        if len(raw) > lim.max_label_value_len or raw.count("=") > lim.max_labels:  # else within limits for sure
            if len(labels) > lim.max_labels:
                return f"{len(labels)} labels (limit {lim.max_labels})"
            longest = max((len(v) for v in labels.values()), default=0)
            if longest > lim.max_label_value_len:
                return f"a label value of {longest} characters (limit {lim.max_label_value_len})"
        return labels

    def bucket(self, raw: str) -> tuple[dict[str, str] | str, float]:
        got = self.buckets_seen.get(raw)
        if got is None:
            got = self.buckets_seen[raw] = self._split(raw)
        return got

    def _split(self, raw: str) -> tuple[dict[str, str] | str, float]:
        i = raw.find('le="')
        j = raw.find('"', i + 4) if i >= 0 else -1
        if i >= 0 and j >= 0 and (i == 0 or raw[i - 1] == ",") and "\\" not in raw[i:j]:
            le_s = raw[i + 4 : j]
            base = raw[: i - 1] + raw[j + 1 :] if i else raw[j + 2 :] if raw[j + 1 : j + 2] == "," else raw[j + 1 :]
        else:  # spaces around "=", or le not where a label starts: the exact (slower) way
            m = _LE.search(raw)
            if m is None:
                return "a bucket without le", math.nan
            le_s = m.group(2)
            base = raw[: m.start()] + ("," if m.group(1) and m.group(3) else "") + raw[m.end() :]
        le = self.les.get(le_s)
        if le is None:
            try:
                le = float(le_s)
            except ValueError:
                le = math.nan
            self.les[le_s] = le
        if math.isnan(le):
            return "a bucket without a numeric le", le
        return self.get(base), le


Sample = tuple[str, str, float]
Chunk = tuple[str, list[Sample]]  # (part, a run of samples of one name)


def resolve_buckets(
    run: list[Sample], labels: SeriesLabels, out: list[tuple[dict[str, str], float, float]]
) -> str | None:
    """A run of bucket lines mostly differs only in ``le``: the first line is split the careful way, and the
    others that share its text around ``le`` reuse its labels with a string slice (the rest go the careful way).
    Appends ``(labels without le, le, count)`` per line."""
    first = run[0][1]
    lab, _le = labels.bucket(first)
    if isinstance(lab, str):
        return lab
    i = first.find('le="')
    j = first.find('"', i + 4)
    if i < 0 or j < 0 or (i > 0 and first[i - 1] != ","):  # le is not a label of its own there: no shortcut
        i, j = 0, len(first)
    head, tail = first[: i + 4], first[j:]
    start, cut = len(head), len(tail)
    les, add = labels.les, out.append
    for _n, raw, v in run:
        if raw.startswith(head) and raw.endswith(tail) and len(raw) > start + cut:
            le_s = raw[start:-cut]
            le = les.get(le_s)
            if le is not None and le == le and '"' not in le_s:  # a numeric le seen before (not NaN)
                add((lab, le, v))
                continue
        got, le = labels.bucket(raw)
        if isinstance(got, str):
            return got
        add((got, le, v))
    return None
