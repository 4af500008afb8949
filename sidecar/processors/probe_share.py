"""The model probe's share of Triton's own counters, taken out of the derived SLIs.

Triton counts the probe's requests like any other: ``nv_inference_request_success`` and ``_failure`` include
them. The probe records every request Triton answered or failed (``sidecar.probe_marker.ProbeLedger``); at each
scrape the deriver takes the ledger's increase per model/version since the last scrape and subtracts it from
the interval's increases, before they reach the reset-corrected totals, the rates and the error ratio. The
counts are exact: ``sidecar_model_request_success_total`` grows by the users' requests only.

Alignment: a probe is recorded when its answer arrives, Triton counts it a moment before, so a scrape can fall
in between; what cannot be taken from one interval (more probe requests than Triton counted) is carried to the
next one, and dropped after that, counted in ``unmatched`` (sidecar_triton_probe_unmatched_total): a probe of
a version Triton does not report, a probe failure Triton did not count as one, or, after a Triton restart, the
probes of the lost part of the interval. A probe that let Triton pick the version (``version: ""``) is put on
the model's only version in the scrape; with several it cannot be placed and is counted as unmatched.

Failed probes are taken from the failure reasons in the order BACKEND, OTHER, then the rest (Triton 2.51 does
not say which reason a request got). Latency is not subtracted: docs/actions.md bounds what the probes add.
"""

from __future__ import annotations

from collections.abc import Iterable

from sidecar.probe_marker import ProbeLedger

__all__ = ["ProbeShare"]

Key = tuple[str, str]
_FAILURE_ORDER = ("BACKEND", "OTHER")


class ProbeShare:
    def __init__(self, ledger: ProbeLedger) -> None:
        self.ledger = ledger
        self._seen: dict[Key, tuple[int, int]] = {}
        self._carry: dict[Key, list[float]] = {}  # answered, failed still to take; age in updates
        self.unmatched = 0.0

    def begin(self, keys: Iterable[Key], known: bool) -> None:
        """Take the ledger's increase since the last scrape; ``keys`` are this scrape's model/versions. Before
        the first good scrape (``known`` False) nothing is subtracted: Triton's first totals are taken as
        they are, the probes' included."""
        by_model: dict[str, list[str]] = {}
        for m, v in keys:
            by_model.setdefault(m, []).append(v)
        for key in [k for k, c in self._carry.items() if c[2] >= 1]:  # carried once already: dropped
            c = self._carry.pop(key)
            self.unmatched += c[0] + c[1]
        for c in self._carry.values():
            c[2] += 1
        for (m, v), (a, f) in self.ledger.totals().items():
            pa, pf = self._seen.get((m, v), (0, 0))
            self._seen[(m, v)] = (a, f)
            da, df = a - pa, f - pf
            if not (da or df) or not known:
                continue
            versions = by_model.get(m, [])
            if not v and len(versions) == 1:
                v = versions[0]
            if v not in versions:
                self.unmatched += da + df
                continue
            c = self._carry.setdefault((m, v), [0.0, 0.0, 0.0])
            c[0] += da
            c[1] += df

    def take(
        self,
        key: Key,
        deltas: dict[str, float],
        fdeltas: dict[str, float],
        totals: dict[str, float],
        ftotals: dict[str, float],
    ) -> float:
        """Subtract the probes of ``key`` from this interval's increases and the totals; returns the probe
        requests Triton answered that were taken (the deriver still counts their time in stage averages)."""
        c = self._carry.get(key)
        if c is None:
            return 0.0
        ok = min(c[0], deltas.get("success", 0.0))
        if ok:
            deltas["success"] -= ok
            totals["success"] = totals.get("success", 0.0) - ok
            c[0] -= ok
        for reason in (*_FAILURE_ORDER, *sorted(set(fdeltas) - set(_FAILURE_ORDER))):
            if c[1] <= 0:
                break
            bad = min(c[1], fdeltas.get(reason, 0.0))
            if bad:
                fdeltas[reason] -= bad
                ftotals[reason] = ftotals.get(reason, 0.0) - bad
                c[1] -= bad
        if c[0] <= 0 and c[1] <= 0:
            del self._carry[key]
        return ok
