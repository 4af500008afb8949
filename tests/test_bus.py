"""The bus: one item type per batch kind (a batch of another type is refused, counted and logged, never raised
into its publisher), and subscriptions by kind and, where wiring says so, by source."""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import get_args

import pytest
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.component import Bus
from sidecar.config import parse_config
from sidecar.model import (
    BATCH_ITEM_TYPES,
    BATCH_KINDS,
    Batch,
    BatchKind,
    GpuMemoryReading,
    GpuSnapshot,
    Sample,
    SeriesSnapshot,
)
from sidecar.service import Service
from sidecar.sources.gpu.publisher import BusGpuSink
from sidecar.store import Store

SAMPLE = Sample("triton_model_state", (("model", "m"), ("state", "READY"), ("version", "1")), 1.0)
SNAP = GpuSnapshot((), MappingProxyType({}), 0, "not sampled yet", sampled=False)


def refused(reg: CollectorRegistry, kind: str, source: str) -> float | None:
    return reg.get_sample_value("sidecar_bus_batches_refused_total", {"kind": kind, "source": source})


def test_every_kind_has_exactly_one_item_type() -> None:
    assert set(BATCH_ITEM_TYPES) == set(BATCH_KINDS) == set(get_args(BatchKind))
    assert len(BATCH_KINDS) == len(set(BATCH_KINDS))
    with pytest.raises(TypeError):
        BATCH_ITEM_TYPES["samples"] = SeriesSnapshot  # type: ignore[index]


def test_a_batch_of_the_wrong_item_type_is_refused_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    reg = CollectorRegistry()
    bus = Bus(reg, logging.getLogger("test.bus"))
    seen: list[Batch] = []
    bus.subscribe("samples", "spy", seen.append)
    bus.subscribe("samples", "elsewhere", seen.append, source="other")
    wrong = Batch(kind="samples", source="nvml", items=(SNAP,), complete=True)  # a GPU snapshot is not a Sample
    with caplog.at_level(logging.ERROR, logger="test.bus"):
        # Not raised into the publisher: it is told that the subscriber meant to get it did not take it.
        assert bus.publish(wrong) == ["spy"]
        assert bus.publish(wrong) == ["spy"]
    assert seen == []
    assert refused(reg, "samples", "nvml") == 2
    assert reg.get_sample_value("sidecar_bus_items_total", {"kind": "samples", "source": "nvml"}) is None
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused a samples batch from nvml: it carries GpuSnapshot, the kind carries Sample only"]

    assert bus.publish(Batch(kind="samples", source="nvml", items=(SAMPLE,))) == []  # the right type still flows
    assert len(seen) == 1 and refused(reg, "samples", "nvml") == 2
    assert reg.get_sample_value("sidecar_bus_items_total", {"kind": "samples", "source": "nvml"}) == 1


def test_only_the_first_item_is_checked_unless_every_item_is_asked_for() -> None:
    mixed = Batch(kind="samples", source="s", items=(SAMPLE, SNAP))
    reg = CollectorRegistry()
    cheap = Bus(reg)
    cheap.subscribe("samples", "spy", lambda b: None)
    assert cheap.publish(mixed) == [] and refused(reg, "samples", "s") is None

    reg = CollectorRegistry()
    strict = Bus(reg, check_all_items=True)
    strict.subscribe("samples", "spy", lambda b: None)
    assert strict.publish(mixed) == ["spy"] and refused(reg, "samples", "s") == 1


def test_an_empty_batch_is_of_every_kind() -> None:
    """A failed scrape is a complete ``scrapes`` batch with no snapshot: the view is unknown."""
    reg = CollectorRegistry()
    bus = Bus(reg, check_all_items=True)
    seen: list[Batch] = []
    bus.subscribe("scrapes", "spy", seen.append)
    assert bus.publish(Batch(kind="scrapes", source="triton", items=(), complete=True)) == []
    assert len(seen) == 1 and refused(reg, "scrapes", "triton") is None


def test_a_subscriber_given_a_source_gets_that_sources_batches_only() -> None:
    bus = Bus(CollectorRegistry())
    mine: list[str] = []
    every: list[str] = []
    bus.subscribe("samples", "mine", lambda b: mine.append(b.source), source="triton_model_api")
    bus.subscribe("samples", "every", lambda b: every.append(b.source))
    for source in ("other", "triton_model_api"):
        assert bus.publish(Batch(kind="samples", source=source, items=(SAMPLE,))) == []
    assert mine == ["triton_model_api"] and every == ["other", "triton_model_api"]
    assert bus.subscribers("samples") == ["mine", "every"]


def test_the_gpu_sink_publishes_a_snapshot_then_its_memory_reading_each_of_its_own_kind() -> None:
    reg = CollectorRegistry()
    bus = Bus(reg, check_all_items=True)
    got: list[tuple[str, type]] = []
    for kind in BATCH_KINDS:
        bus.subscribe(kind, f"spy_{kind}", lambda b: got.extend((b.kind, type(i)) for i in b.items))
    sink = BusGpuSink(bus, FakeClock())
    sink.register_source("nvml")
    sink.publish("nvml", [], {}, visible=1, reading=GpuMemoryReading(used={"GPU-1": 1e9}))
    sink.note("nvml", "NVML failed")
    assert got == [
        ("gpu_snapshots", GpuSnapshot),
        ("gpu_snapshots", GpuSnapshot),
        ("gpu_memory", GpuMemoryReading),
        ("gpu_snapshots", GpuSnapshot),
    ]
    assert all(refused(reg, kind, "nvml") is None for kind in BATCH_KINDS)


@pytest.mark.parametrize(("level", "refused_mixed"), [(logging.DEBUG, True), (logging.INFO, False)])
def test_the_service_checks_every_item_when_it_logs_at_debug(level: int, refused_mixed: bool) -> None:
    log = logging.getLogger(f"test.bus.service.{level}")
    log.setLevel(level)
    reg = CollectorRegistry()
    svc = Service(parse_config({}), clock=FakeClock(), registry=reg, store=Store(":memory:"), factories=[], logger=log)
    svc.bus.subscribe("samples", "spy", lambda b: None)
    svc.bus.publish(Batch(kind="samples", source="s", items=(SAMPLE, SNAP)))
    assert (refused(reg, "samples", "s") == 1) is refused_mixed
