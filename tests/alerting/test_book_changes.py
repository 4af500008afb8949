"""Which changes an alert cites: those made before its condition first held (within the look-back), newest
first with their times; never one made after the condition began, however long the alert stays active."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alerting_helpers import make_service

from sidecar.clock import FakeClock
from sidecar.model import Change, Finding

T0 = 1_700_000_000.0


def _ctr(version: str = "all") -> Finding:
    return Finding(
        check="ctr_mean_down",
        kind="business",
        labels={"model": "ctr", "version": version},
        active=True,
        value=0.03,
        baseline=0.04,
        effect_size=-0.25,
        threshold=0.15,
        window_secs=3600,
        severity="high",
        facts={
            "display_name": "CTR mean",
            "aggregate": "mean",
            "compare": "relative",
            "direction": "down",
            "baseline_secs": 86400,
            "change": -0.25,
            "events": 500,
        },
    )


def _service(tmp_path: Path, clock: FakeClock, look_back: float = 86_400) -> tuple[Any, Any]:
    svc = make_service(
        tmp_path,
        {
            "alerting": {
                "enabled": True,
                "changes": {"poll_repository": False, "annotate_window_secs": look_back, "max_in_annotation": 3},
            }
        },
        clock=clock,
    )
    return svc.component("alert_book"), svc.component("changes")


def test_a_change_posted_after_the_condition_began_is_not_cited(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    book, changes = _service(tmp_path, clock)
    changes.record(Change(what="ctr v2 rollout", at=T0 - 600, who="ci", model="ctr"))
    book.on_findings([_ctr()], clock.now())  # the condition first holds at T0
    clock.advance(120)
    changes.record(Change(what="feature pipeline PR#9", at=clock.now(), who="ci", model="ctr"))
    clock.advance(60)
    book.on_findings([_ctr()], clock.now())  # still active, annotations rebuilt
    (a,) = book.alerts.values()
    assert "ctr v2 rollout" in a.annotations["summary"]
    assert "PR#9" not in a.annotations["summary"] and "PR#9" not in a.annotations["description"]


def test_several_changes_are_listed_newest_first_with_their_times_within_the_look_back(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    book, changes = _service(tmp_path, clock, look_back=3600)
    changes.record(Change(what="too old", at=T0 - 7200, model="ctr"))
    changes.record(Change(what="older", at=T0 - 1800, who="ana", model="ctr"))
    changes.record(Change(what="newer", at=T0 - 60, who="ci", model="ctr"))
    changes.record(Change(what="other model", at=T0 - 30, model="fraud"))
    book.on_findings([_ctr()], clock.now())
    (a,) = book.alerts.values()
    d = a.annotations["description"]
    assert d.endswith("Recent changes: newer by ci at 2023-11-14 22:12:20Z; older by ana at 2023-11-14 21:43:20Z.")
    assert "too old" not in d and "other model" not in d
    assert a.annotations["summary"].endswith("| recent change: newer")


def test_a_drift_alert_cites_changes_before_its_condition_began_not_before_it_fired(tmp_path: Path) -> None:
    # A drift finding becomes active only after sustained_secs; its condition began earlier (condition_since).
    clock = FakeClock(T0)
    book, changes = _service(tmp_path, clock)
    changes.record(Change(what="reference re-pinned", at=T0 - 900, model="ctr"))
    changes.record(Change(what="feature pipeline PR#9", at=T0 - 300, model="ctr"))
    drift = Finding(
        check="drift",
        kind="drift",
        labels={"model": "ctr", "version": "2", "feature": "clicks_7d", "test": "ks"},
        active=True,
        value=0.3,
        summary="drift ctr v2 clicks_7d",
        annotations={"condition_since": f"{T0 - 600:.0f}"},
    )
    book.on_findings([drift], clock.now())
    (a,) = book.alerts.values()
    assert "reference re-pinned" in a.annotations["summary"]
    assert "PR#9" not in a.annotations["description"]


def test_a_per_version_alert_cites_changes_of_its_version_or_of_the_whole_model(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    book, changes = _service(tmp_path, clock)
    changes.record(Change(what="v1 config", at=T0 - 100, model="ctr", version="1"))
    changes.record(Change(what="model-wide flag", at=T0 - 200, model="ctr"))
    book.on_findings([_ctr(version="2")], clock.now())
    (a,) = book.alerts.values()
    assert "model-wide flag" in a.annotations["description"] and "v1 config" not in a.annotations["description"]


def test_many_changes_after_the_condition_began_do_not_crowd_out_the_one_before(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    book, changes = _service(tmp_path, clock)
    changes.record(Change(what="the cause", at=T0 - 60, model="ctr"))
    book.on_findings([_ctr()], clock.now())
    for i in range(80):  # more than one page of the change log's newest-first lookup
        clock.advance(1)
        changes.record(Change(what=f"later deploy {i}", at=clock.now(), model="ctr"))
    book.on_findings([_ctr()], clock.now())
    (a,) = book.alerts.values()
    assert a.annotations["summary"].endswith("| recent change: the cause")
