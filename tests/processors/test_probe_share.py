"""The model probe's requests are taken out of the SLIs derived from Triton's counters: exactly for counts,
across a Triton restart, when a scrape falls between Triton counting a probe and the probe recording it, and
when the probe let Triton pick the version; what cannot be placed is counted, never subtracted twice."""

from __future__ import annotations

from test_derive import K, exposition, feed, scrape

from sidecar.probe_marker import ProbeLedger
from sidecar.processors.derive import Deriver
from sidecar.processors.probe_share import ProbeShare


def _deriver() -> tuple[Deriver, ProbeLedger, ProbeShare]:
    ledger = ProbeLedger()
    share = ProbeShare(ledger)
    return Deriver(probes=share), ledger, share


def _probes(ledger: ProbeLedger, n: int, version: str = "1", answered: bool = True) -> None:
    for _ in range(n):
        ledger.record("ctr", version, answered=answered)


def test_answered_and_failed_probes_leave_the_counts_and_rates() -> None:
    d, ledger, share = _deriver()
    feed(d, scrape({("ctr", "1"): 100}, {("ctr", "1", "BACKEND"): 0}), 0.0)
    _probes(ledger, 4)
    _probes(ledger, 2, answered=False)
    # 60 users' successes + 4 probes; 10 users' failures + 2 probes' (Triton says BACKEND).
    feed(d, scrape({("ctr", "1"): 164}, {("ctr", "1", "BACKEND"): 12}), 10.0)
    e = exposition(d)
    assert d.rates("ctr", "1") == {"total": 7.0, "success": 6.0, "failure": 1.0, "inferences": 6.4}
    assert e[("sidecar_model_request_success_total", K)] == 100 + 60
    assert e[("sidecar_model_request_failure_total", (K[0], ("reason", "BACKEND"), K[1]))] == 10
    assert d.error_ratio("ctr", "1") == 10 / 70
    assert share.unmatched == 0


def test_a_probe_recorded_before_triton_counts_it_is_taken_from_the_next_interval() -> None:
    # Triton updates its statistics when it releases the request, which can be after the answer reached us.
    d, ledger, share = _deriver()
    feed(d, scrape({("ctr", "1"): 0}), 0.0)
    _probes(ledger, 1)
    feed(d, scrape({("ctr", "1"): 0}), 10.0)
    feed(d, scrape({("ctr", "1"): 3}), 20.0)  # the probe's and 2 users'
    assert d.rates("ctr", "1")["success"] == 0.2  # type: ignore[index]
    assert exposition(d)[("sidecar_model_request_success_total", K)] == 2
    assert share.unmatched == 0


def test_a_probe_counted_in_an_interval_already_reported_is_counted_as_unmatched_not_taken_later() -> None:
    d, ledger, share = _deriver()
    feed(d, scrape({("ctr", "1"): 0}), 0.0)
    feed(d, scrape({("ctr", "1"): 1}), 10.0)  # Triton counted the probe; the probe had not recorded it yet
    _probes(ledger, 1)
    for t in (20.0, 30.0):
        feed(d, scrape({("ctr", "1"): 1}), t)
        assert share.unmatched == 0  # carried one interval
    feed(d, scrape({("ctr", "1"): 4}), 40.0)  # 3 users'
    assert share.unmatched == 1  # dropped before this interval: the users' 3 are not touched
    assert d.rates("ctr", "1")["success"] == 0.3  # type: ignore[index]
    assert exposition(d)[("sidecar_model_request_success_total", K)] == 4


def test_after_a_triton_restart_the_probes_are_taken_from_the_new_counts() -> None:
    d, ledger, share = _deriver()
    feed(d, scrape({("ctr", "1"): 50}), 0.0)
    _probes(ledger, 3)
    feed(d, scrape({("ctr", "1"): 8}), 10.0)  # restarted: 8 since, 3 of them the probe's
    assert d.rates("ctr", "1")["success"] == 0.5  # type: ignore[index]
    assert exposition(d)[("sidecar_model_request_success_total", K)] == 50 + 5
    assert share.unmatched == 0


def test_a_probe_without_a_version_lands_on_the_only_version_and_unknown_ones_are_counted() -> None:
    d, ledger, share = _deriver()
    feed(d, scrape({("ctr", "1"): 0}), 0.0)
    _probes(ledger, 2, version="")
    ledger.record("gone", "3", answered=True)
    feed(d, scrape({("ctr", "1"): 5}), 10.0)
    assert d.rates("ctr", "1")["success"] == 0.3  # type: ignore[index]
    assert share.unmatched == 1


def test_probes_before_the_first_scrape_are_not_subtracted_from_its_totals() -> None:
    d, ledger, share = _deriver()
    _probes(ledger, 5)
    feed(d, scrape({("ctr", "1"): 40}), 0.0)
    assert exposition(d)[("sidecar_model_request_success_total", K)] == 40
    assert share.unmatched == 0
