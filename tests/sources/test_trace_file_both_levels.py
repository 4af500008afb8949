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
from sidecar.store import Store

FIXTURE = DATA / "trace-file-tensors.json"  # a real Triton 2.51 capture: 5 requests, each a batch of 2 rows
SPANS_PER_REQUEST = 3  # InferRequest, the model span, compute
ROWS_PER_REQUEST = 2
MAPPING = {"ctr": {"inputs": {"x": ["age", "income", "clicks_7d", "dwell_secs"]}, "score": {"tensor": "score"}}}


class MonoClock(FakeClock):
    """Monotonic time just after the fixture's timestamps (Triton's ns are seconds since boot)."""

    def __init__(self, mono_s: float = 8400.0) -> None:
        super().__init__(start=1_800_000_000.0)
        self._base = mono_s - super().monotonic()

    def monotonic(self) -> float:
        return super().monotonic() + self._base


def config(trace: Path, store: Path, delete_after_read: bool = False) -> Any:
    """The documented setup: TIMESTAMPS and TENSORS written to one file, both sections naming it."""
    return parse_config({
        "store": {"path": str(store)},
        "traces": {"enabled": True, "receiver_enabled": False,
                   "file": {"path": str(trace), "delete_after_read": delete_after_read}},
        "events": {"enabled": False, "triton_trace": {
            "enabled": True, "path": str(trace), "models": MAPPING, "delete_after_read": delete_after_read}},
    })


class Run:
    """A Service on ``store_path`` with a subscriber counting every span and event published on its bus."""

    def __init__(self, trace: Path, store_path: Path, clock: FakeClock, delete_after_read: bool = False) -> None:
        self.store = Store(store_path)
        self.svc = Service(config(trace, store_path, delete_after_read), clock=clock, registry=CollectorRegistry(),
                           store=self.store)
        self.spans: list[Any] = []
        self.events: list[Event] = []
        self.svc.bus.subscribe("spans", "count", lambda b: self.spans.extend(b.items))
        self.svc.bus.subscribe("events", "count", lambda b: self.events.extend(b.items))  # type: ignore[arg-type]

    def poll(self) -> None:
        """One poll of every file-reading source, in build order (what their periodic loops do)."""
        for comp in self.svc.components:
            if hasattr(comp, "poll_once"):
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
    run = Run(trace, tmp_path / "state.sqlite", MonoClock(), delete_after_read=True)
    run.poll()
    run.poll()
    assert_exactly_once(run.spans, run.events)
    assert not (tmp_path / "trace.json.0").exists()  # deleted once both outputs were published
    run.close()
