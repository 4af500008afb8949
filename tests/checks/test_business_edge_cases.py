"""Found in review: a failing store prune must not take the round's business findings with it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from sidecar.checks.business.check import BusinessChecks
from sidecar.checks.business.config import BusinessConfig
from sidecar.checks.business.store import TABLE
from sidecar.clock import FakeClock
from sidecar.model import Batch, Event
from sidecar.store import Store

T0 = 1_700_000_000.0


class _NoDeleteStore(Store):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        if sql.lstrip().upper().startswith("DELETE"):
            raise sqlite3.OperationalError("database is locked")
        return super().execute(sql, params)


def test_a_failing_prune_is_counted_and_the_findings_still_come_back(tmp_path: Path) -> None:
    clock, reg = FakeClock(T0), CollectorRegistry()
    cfg = BusinessConfig.model_validate(
        {
            "enabled": True,
            "checks": {
                "score_mean": {
                    "field": "score",
                    "aggregate": "mean",
                    "window_secs": 600,
                    "bucket_secs": 60,
                    "compare": "absolute",
                    "direction": "up",
                    "threshold": 0.5,
                    "min_events": 1,
                }
            },
        }
    )
    bc = BusinessChecks(cfg, registry=reg, clock=clock, store=_NoDeleteStore(tmp_path / "s.sqlite"))
    bc.observe(
        Batch(
            kind="events",
            source="t",
            items=tuple(Event(model="m", version="1", timestamp=T0 - 1, score=0.9) for _ in range(5)),
        )
    )
    (f,) = bc.evaluate(clock.now())
    assert f.active and f.value == 0.9
    assert reg.get_sample_value("sidecar_business_store_errors_total") == 2


class _FlakyWriteStore(Store):
    """The first bulk write fails (a locked database), later ones succeed."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failures_left = 1

    def executemany(self, sql: str, rows: Any) -> None:
        if self.failures_left:
            self.failures_left -= 1
            raise sqlite3.OperationalError("database is locked")
        super().executemany(sql, rows)


def test_buckets_a_failed_write_left_unsaved_are_written_next_round(tmp_path: Path) -> None:
    clock, reg = FakeClock(T0), CollectorRegistry()
    cfg = BusinessConfig.model_validate(
        {
            "enabled": True,
            "checks": {
                "score_mean": {
                    "field": "score",
                    "aggregate": "mean",
                    "window_secs": 600,
                    "bucket_secs": 60,
                    "compare": "absolute",
                    "direction": "up",
                    "threshold": 0.5,
                    "min_events": 1,
                }
            },
        }
    )
    store = _FlakyWriteStore(tmp_path / "s.sqlite")
    bc = BusinessChecks(cfg, registry=reg, clock=clock, store=store)
    bc.observe(
        Batch(
            kind="events",
            source="t",
            items=tuple(Event(model="m", version="1", timestamp=T0 - 1, score=0.9) for _ in range(5)),
        )
    )
    bc.evaluate(clock.now())
    assert reg.get_sample_value("sidecar_business_store_errors_total") == 1
    clock.advance(10)
    bc.evaluate(clock.now())  # nothing new observed: only the retry of the failed write
    saved = Store(tmp_path / "s.sqlite").query(f"SELECT SUM(count) FROM {TABLE} WHERE tier = 'cur'")
    assert saved == [(5,)]
    # A restart on the same store sees the 5 events.
    again = BusinessChecks(cfg, registry=CollectorRegistry(), clock=clock, store=Store(tmp_path / "s.sqlite"))
    (f,) = again.evaluate(clock.now())
    assert f.value == 0.9
