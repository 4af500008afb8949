"""The burn-rate windows at bucket boundaries: a window covers every bucket that overlaps it (the current,
partial one included), so a steady bad rate never goes inactive in the first seconds of a bucket, even with a
short window as wide as one bucket; a window narrower than a bucket is a config error naming the field."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from sidecar.checks.goodput.check import GoodputCheck
from sidecar.checks.goodput.config import GoodputConfig
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Batch, Event

T0 = 1_764_892_800.0  # a multiple of 60: bucket boundaries fall on whole minutes
GOOD = {"ttft_ms": 120.0, "inter_token_ms": 20.0}
SLOW = {"ttft_ms": 900.0, "inter_token_ms": 20.0}


def _feed(chk: GoodputCheck, at: float, fields: dict[str, float], n: int) -> None:
    items = tuple(Event(model="chat", version="1", timestamp=at, fields=dict(fields)) for _ in range(n))
    chk.observe(Batch(kind="events", source="http", items=items, received_at=at))


def test_a_steady_bad_rate_never_goes_inactive_across_bucket_boundaries() -> None:
    # The short window is one bucket wide: the case that went inactive in the first seconds of each bucket.
    chk = GoodputCheck(
        GoodputConfig(
            enabled=True,
            bucket_secs=60,
            min_requests=20,
            burn_windows=[{"long_secs": 600, "short_secs": 60, "factor": 5, "severity": "critical"}],
        ),
        registry=CollectorRegistry(),
    )
    states: list[tuple[float, bool]] = []
    # 2 requests a second, one in ten slow (10% bad: 10x the 1% budget, over the pair's 5x), for 15 minutes;
    # evaluated every 5 s, and just after each boundary (0.5 s into a bucket).
    for s in range(15 * 60):
        at = T0 + s
        _feed(chk, at, GOOD, 2 if s % 5 else 1)
        if s % 5 == 0:
            _feed(chk, at, SLOW, 1)
        if s >= 120 and (s % 5 == 0 or s % 60 == 59):
            for when in (at, at + 0.5):
                (f,) = chk.evaluate(when)
                states.append((when - T0, f.active))
    assert len(states) > 300
    assert [t for t, active in states if not active] == []
    # Each bucket boundary was crossed (an evaluation 0.5 s into a fresh bucket) and the pair held.
    assert {t for t, _ in states} >= {60.0 * m + 0.5 for m in range(3, 15)}


def test_the_short_window_covers_the_previous_bucket_at_the_start_of_a_new_one() -> None:
    chk = GoodputCheck(GoodputConfig(enabled=True, bucket_secs=60), registry=CollectorRegistry())
    _feed(chk, T0 + 10, SLOW, 30)
    s = chk.series[("chat", "1")]
    # 0.5 s into the next bucket: the 60 s window still holds the 30 requests (the old arithmetic held none).
    assert s.window(T0 + 60.5, 60).total == 30
    assert s.windows(T0 + 60.5, [60.0])[60.0].total == 30
    # Once the whole bucket is older than the window, it leaves it.
    assert s.window(T0 + 120.0, 60).total == 0


def test_a_window_narrower_than_a_bucket_is_a_config_error_naming_the_field() -> None:
    pairs = [{"long_secs": 3600, "short_secs": 60, "factor": 14.4}]
    with pytest.raises(ConfigError, match=r"checks\.goodput.*burn_windows\.0\.short_secs.*bucket_secs"):
        parse_config({"checks": {"goodput": {"enabled": True, "bucket_secs": 120, "burn_windows": pairs}}})
