"""Times and numbers out of range are refused with the field path on every events path (HTTP and JSONL),
whatever the config or the machine's time zone; nothing refused is published."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from drift_testutil import make_ctx

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.model import Batch, Event
from sidecar.sources.events.config import EventsConfig
from sidecar.sources.events.jsonl import JsonlTailer
from sidecar.sources.events.metrics import EventsMetrics
from sidecar.sources.events.parse import EventError, parse_event, parse_events
from sidecar.wiring.event_subs import subscribe_events

NOW = 1_700_000_000.0
Y2K = 946_684_800.0


def _refused(doc: dict[str, Any], cfg: EventsConfig | None = None, now: float = NOW) -> EventError:
    with pytest.raises(EventError) as info:
        parse_event({"model": "m", **doc}, "events[0]", cfg or EventsConfig(), now)
    return info.value


@pytest.mark.parametrize(
    "ts",
    [
        NOW * 1000,
        NOW * 1e6,
        -1.0,
        1e300,
        "NaN",
        "inf",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00",
        10**400,
    ],
    ids=lambda v: repr(v)[:24],
)
def test_an_event_time_out_of_range_is_refused_naming_the_field(ts: Any) -> None:
    assert _refused({"timestamp": ts}).field == "events[0].timestamp"


def test_a_time_before_2000_is_refused_even_within_max_age() -> None:
    # A clock or config that would let it through (a year of age an hour after 2000) still refuses it.
    cfg = EventsConfig(max_age_secs=365 * 86400.0)
    err = _refused({"timestamp": "1999-12-31T23:00:00Z"}, cfg, now=Y2K + 3600)
    assert err.field == "events[0].timestamp" and "2000-01-01" in err.message


def test_milliseconds_get_a_hint() -> None:
    assert "milliseconds" in _refused({"timestamp": NOW * 1000}).message


@pytest.mark.parametrize("key", ["max_age_secs", "max_future_skew_secs"])
def test_time_windows_in_the_config_are_bounded(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"events": {key: 1e12}})
    assert f"events.{key}" in str(info.value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("features", {"x": math.nan}),
        ("features", {"x": math.inf}),
        ("features", {"x": 10**400}),
        ("score", 10**400),
        ("fields", {"n": -math.inf}),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_numbers_that_are_not_finite_are_refused_naming_the_field(field: str, value: Any) -> None:
    err = _refused({field: value})
    assert err.field.startswith(f"events[0].{field}") and "finite" in err.message


@pytest.fixture
def new_york() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_a_time_without_offset_is_utc_whatever_the_machine_zone(new_york: None) -> None:
    ok, bad = parse_events([{"model": "m", "timestamp": "2023-11-14T22:13:20"}], EventsConfig(), NOW)
    assert bad == [] and ok[0].timestamp == NOW


def test_jsonl_refuses_and_counts_bad_times_and_publishes_the_rest(tmp_path: Path) -> None:
    clock = FakeClock(NOW)
    path = tmp_path / "events.jsonl"
    lines = [
        {"model": "m", "timestamp": ts} for ts in (NOW * 1000, "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", NOW - 5)
    ]
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in lines) + b'{"model": "m", "timestamp": 1e400}\n')
    ctx = make_ctx(tmp_path / "state.sqlite", clock, {"events": {"jsonl": [{"path": str(path)}]}})
    got: list[Event] = []

    def take(b: Batch) -> None:
        got.extend(b.items)  # type: ignore[arg-type]

    subscribe_events(ctx.bus, "t", take)
    cfg = ctx.config.events
    tailer = JsonlTailer(
        cfg.jsonl[0],
        events_cfg=cfg,
        metrics=EventsMetrics(ctx.registry),
        bus=ctx.bus,
        clock=ctx.clock,
        store=ctx.store,
        registry=ctx.registry,
    )
    assert tailer.poll_once() == 1 and [e.timestamp for e in got] == [NOW - 5]
    reg = ctx.registry
    assert reg.get_sample_value("sidecar_events_rejected_total", {"source": "jsonl", "reason": "invalid"}) == 3
    assert reg.get_sample_value("sidecar_events_rejected_total", {"source": "jsonl", "reason": "not_json"}) == 1
