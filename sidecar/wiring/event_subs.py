"""Subscribing a reader of prediction events to both shapes they travel in on the bus.

A source publishes ``events`` (one ``Event`` each) or, for a push of the common shape, ``event_columns`` (one
``EventColumns`` per model/version). A reader with a columnar path passes it as ``columns``; any other reader
gets the same events as ``Event`` objects in an ``events`` batch, so no reader misses the columnar ones.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

from sidecar.component import Bus
from sidecar.model import Batch

__all__ = ["as_events", "subscribe_events"]

Observe = Callable[[Batch], None]


# The bus hands one batch to its subscribers in turn: the last conversion is kept (with the batch it came from,
# so that batch's id cannot be reused meanwhile), and every reader without a columnar path after the first shares
# its Events, as readers of an ``events`` batch share its items, instead of building them again each.
_last: tuple[Batch, Batch] | None = None


def as_events(batch: Batch) -> Batch:
    """An ``event_columns`` batch as the ``events`` batch of the same events, in the same order (built once per
    batch however many readers ask)."""
    global _last
    last = _last
    if last is not None and last[0] is batch:
        return last[1]
    out = _as_events(batch)
    _last = (batch, out)
    return out


def _as_events(batch: Batch) -> Batch:
    blocks = batch.items
    items = tuple(chain.from_iterable(c.events() for c in blocks))
    if len(blocks) > 1:  # several model/versions: back to the order the source received them in
        at = list(chain.from_iterable(c.rows().tolist() for c in blocks))
        items = tuple(e for _, e in sorted(zip(at, items, strict=True), key=lambda p: p[0]))
    return Batch(kind="events", source=batch.source, items=items, received_at=batch.received_at)


def subscribe_events(
    bus: Bus, name: str, fn: Observe, *, columns: Observe | None = None, source: str | None = None
) -> None:
    """``fn`` gets every ``events`` batch; ``columns`` every ``event_columns`` batch (default: ``fn`` gets
    them as ``events`` batches)."""
    bus.subscribe("events", name, fn, source=source)
    bus.subscribe("event_columns", name, columns or (lambda b: fn(as_events(b))), source=source)
