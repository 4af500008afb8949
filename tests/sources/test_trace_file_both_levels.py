"""One Triton trace file carrying both TIMESTAMPS and TENSORS records, read by the service as configured in the
docs (``traces.file`` and ``events.triton_trace`` naming the same PATH): every span and every tensor row arrives
exactly once, also across rotation, a restart on the same store and ``delete_after_read``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry
from traces_helpers import DATA

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Event
from sidecar.service import Service
from sidecar.sources.events.polled import PolledEventSource
from sidecar.sources.trace_files.source import TraceFileSource
from sidecar.store import Store
from sidecar.wiring.span_subs import subscribe_spans

FIXTURE = DATA / "trace-file-tensors.json"  # a real Triton 2.51 capture: 5 requests, each a batch of 2 rows
SPANS_PER_REQUEST = 3  # InferRequest, the model span, compute
ROWS_PER_REQUEST = 2
MAPPING = {"ctr": {"inputs": {"x": ["age", "income", "clicks_7d", "dwell_secs"]}, "score": {"tensor": "score"}}}


def config(trace: Path, store: Path, delete_after_read: bool = False) -> Any:
    """The documented setup: TIMESTAMPS and TENSORS written to one file, both sections naming it."""
    return parse_config(
        {
            "store": {"path": str(store)},
            "traces": {
                "enabled": True,
                "receiver_enabled": False,
                "file": {"path": str(trace), "delete_after_read": delete_after_read},
            },
            "events": {
                "enabled": False,
                "triton_trace": {
                    "enabled": True,
                    "path": str(trace),
                    "models": MAPPING,
                    "delete_after_read": delete_after_read,
                },
            },
        }
    )


class Run:
    """A Service on ``store_path`` with a subscriber counting every span and event published on its bus."""

    def __init__(self, trace: Path, store_path: Path, clock: FakeClock, delete_after_read: bool = False) -> None:
        self.store = Store(store_path)
        self.svc = Service(
            config(trace, store_path, delete_after_read), clock=clock, registry=CollectorRegistry(), store=self.store
        )
        self.spans: list[Any] = []
        self.events: list[Event] = []
        subscribe_spans(self.svc.bus, "count", lambda b: self.spans.extend(b.items))
        self.svc.bus.subscribe("events", "count", lambda b: self.events.extend(b.items))  # type: ignore[arg-type]

    def poll(self) -> None:
        """One poll of every file-reading source, in build order (what their periodic loops do)."""
        for comp in self.svc.components:
            if isinstance(comp, TraceFileSource | PolledEventSource):
                comp.poll_once()

    def close(self) -> None:
        self.store.close()


def records() -> list[dict[str, Any]]:
    return list(orjson.loads(FIXTURE.read_bytes()))


def assert_exactly_once(spans: list[Any], events: list[Event], n_requests: int = 5) -> None:
    span_ids = [s[1] if isinstance(s, tuple) else s.span_id for s in spans]
    assert len(span_ids) == len(set(span_ids)), "a span arrived twice"
    assert len(span_ids) == SPANS_PER_REQUEST * n_requests
    rows = [(e.request_id, e.features["age"], e.features["income"]) for e in events]
    assert len(rows) == len(set(rows)), "a tensor row arrived twice"
    assert len(rows) == ROWS_PER_REQUEST * n_requests
    assert {e.request_id for e in events} == {f"req-{i}" for i in range(1, n_requests + 1)}


def test_one_file_with_both_levels_and_delete_after_read_gives_every_span_and_tensor_once(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    shutil.copy(FIXTURE, tmp_path / "trace.json.0")
    run = Run(
        trace, tmp_path / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0), delete_after_read=True
    )
    run.poll()
    run.poll()
    assert_exactly_once(run.spans, run.events)
    assert not (tmp_path / "trace.json.0").exists()  # deleted once both outputs were published
    run.close()


def _array(recs: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(recs)


def test_rotation_mid_request_and_mid_record_gives_every_span_and_tensor_once(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    recs = records()
    run = Run(trace, tmp_path / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0))
    # PATH.0 closes in the middle of request 2 (after its TENSOR_QUEUE_INPUT record): Triton rotated.
    (tmp_path / "trace.json.0").write_bytes(_array(recs[:21]))
    run.poll()
    # PATH.1 is still being written, cut inside a record.
    rest = _array(recs[21:])
    (tmp_path / "trace.json.1").write_bytes(rest[: len(rest) // 2])
    run.poll()
    (tmp_path / "trace.json.1").write_bytes(rest)
    run.poll()
    run.poll()
    assert_exactly_once(run.spans, run.events)
    # The request that straddles the rotation has both rows of its output tensor.
    assert sorted(e.score for e in run.events if e.request_id == "req-2") == [0.401312, 0.999955]
    run.close()


def test_restart_at_any_byte_of_a_growing_file_gives_every_span_and_tensor_once(tmp_path: Path) -> None:
    """A new Service on the same store, after the file was read up to each of many cut points (inside records,
    between records, inside a request, between requests), takes the rest and nothing twice."""
    data = _array(records())
    cuts = sorted({1, 2, len(data) - 1, *range(37, len(data), 397)})
    for cut in cuts:
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        trace = d / "trace.json"
        trace.write_bytes(data[:cut])  # Triton appends to PATH while it runs (no log-frequency)
        first = Run(trace, d / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0))
        first.poll()
        first.close()  # stopped without a final poll: only what was committed survives
        trace.write_bytes(data)
        second = Run(trace, d / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0))
        second.poll()
        second.poll()
        spans, events = first.spans + second.spans, first.events + second.events
        try:
            assert_exactly_once(spans, events)
        except AssertionError as e:
            raise AssertionError(f"restart after byte {cut} of {len(data)}: {e}") from e
        second.close()


def test_restart_mid_file_with_delete_after_read_resumes_and_deletes_once(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    recs = records()
    (tmp_path / "trace.json.0").write_bytes(_array(recs[:40]))
    part = _array(recs[40:])
    (tmp_path / "trace.json.1").write_bytes(part[:300])
    first = Run(
        trace, tmp_path / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0), delete_after_read=True
    )
    first.poll()
    assert not (tmp_path / "trace.json.0").exists()  # closed and read: deleted, its partial request kept
    assert (tmp_path / "trace.json.1").exists()  # still being written
    first.close()
    (tmp_path / "trace.json.1").write_bytes(part)
    second = Run(
        trace, tmp_path / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0), delete_after_read=True
    )
    second.poll()
    second.poll()
    assert_exactly_once(first.spans + second.spans, first.events + second.events)
    assert not (tmp_path / "trace.json.1").exists()
    assert second.svc.registry.get_sample_value("sidecar_trace_files_deleted_total") == 1
    second.close()


def test_a_record_cut_short_is_held_until_it_completes_even_past_settling(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    data = _array(records())
    cut = data.index(b'"TENSOR_BACKEND_OUTPUT"', 1000) + 5  # inside request 2's output tensor record
    trace.write_bytes(data[:cut])
    clock = FakeClock(start=1_800_000_000.0, monotonic=8400.0)
    run = Run(trace, tmp_path / "state.sqlite", clock)
    run.poll()
    assert_exactly_once(run.spans, run.events, n_requests=1)  # request 1 is whole; request 2 waits
    clock.advance(60)  # longer than settle_secs: counted as truncated, but the cut record is still held
    run.poll()
    reg = run.svc.registry
    assert reg.get_sample_value("sidecar_trace_file_errors_total", {"reason": "truncated"}) == 1
    assert len(run.events) == 2
    trace.write_bytes(data)
    run.poll()
    run.poll()
    assert_exactly_once(run.spans, run.events)
    assert sorted(e.score for e in run.events if e.request_id == "req-2") == [0.401312, 0.999955]
    assert not reg.get_sample_value("sidecar_trace_file_errors_total", {"reason": "damaged"})
    run.close()


def test_a_subscriber_failing_keeps_the_file(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    shutil.copy(FIXTURE, tmp_path / "trace.json.0")
    run = Run(
        trace, tmp_path / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0), delete_after_read=True
    )

    def broken(batch: Any) -> None:
        raise RuntimeError("disk full")

    run.svc.bus.subscribe("events", "broken", broken)
    run.poll()
    run.poll()
    assert (tmp_path / "trace.json.0").exists()  # a subscriber did not take its events: not deleted
    assert run.svc.registry.get_sample_value("sidecar_trace_file_errors_total", {"reason": "publish"}) == 1
    assert_exactly_once(run.spans, run.events)  # and not published again to those that took them
    run.close()


def test_files_the_former_tensors_reader_read_whole_are_not_read_again_after_the_upgrade(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    part = tmp_path / "trace.json.0"
    shutil.copy(FIXTURE, part)
    st = part.stat()
    store = Store(tmp_path / "state.sqlite")
    store.put("events.tensors", str(part), f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")  # what it wrote
    store.close()
    run = Run(trace, tmp_path / "state.sqlite", FakeClock(start=1_800_000_000.0, monotonic=8400.0))
    run.poll()
    assert run.events == [] and run.spans == []
    run.close()


def test_beyond_max_files_remembered_old_files_are_still_not_read_twice(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry as Registry
    from tracefile_helpers import span_source

    from sidecar.component import Bus

    trace = tmp_path / "trace.json"
    recs = records()
    for i in range(5):  # one request per file, as log-frequency=1 writes them
        (tmp_path / f"trace.json.{i}").write_bytes(_array(recs[15 * i : 15 * (i + 1)]))
    cfg = parse_config({"traces": {"enabled": True, "file": {"path": str(trace), "max_files_remembered": 2}}})
    reg = Registry()
    bus = Bus(reg)
    got: list[Any] = []
    subscribe_spans(bus, "t", lambda b: got.extend(b.items))
    store = Store(tmp_path / "state.sqlite")
    src = span_source(cfg.traces.file, bus, reg, FakeClock(start=1_800_000_000.0, monotonic=8400.0), store)
    for _ in range(4):
        src.poll_once()
    assert len(got) == 15 and len({s[1] for s in got}) == 15
    assert len(src._state().marks) <= 2
    again = span_source(
        cfg.traces.file, Bus(reg := Registry()), reg, FakeClock(start=1_800_000_000.0, monotonic=8400.0), store
    )  # a restart
    assert again.poll_once() == 0
    store.close()


def test_separators_after_the_last_record_are_not_a_record_cut_short(tmp_path: Path) -> None:
    """Found by the fuzzer (the two decoding paths disagreed on what follows ``]``): a closed file ending in a
    newline is finished (deleted), and an idle file ending in ``,`` is not counted as truncated."""
    trace = tmp_path / "trace.json"
    recs = records()
    (tmp_path / "trace.json.0").write_bytes(_array(recs[:15]) + b"\n")
    trace.write_bytes(_array(recs[15:])[:-1] + b",\n")  # PATH, appended to, idle after a record
    clock = FakeClock(start=1_800_000_000.0, monotonic=8400.0)
    run = Run(trace, tmp_path / "state.sqlite", clock, delete_after_read=True)
    run.poll()
    clock.advance(60)
    run.poll()
    assert not (tmp_path / "trace.json.0").exists()
    reg = run.svc.registry
    assert not reg.get_sample_value("sidecar_trace_file_errors_total", {"reason": "truncated"})
    assert_exactly_once(run.spans, run.events)
    run.close()
