"""Subscribing a reader of spans to both shapes they travel in on the bus.

A source publishes ``spans`` (span records) or, for a trace file's requests, ``span_requests`` (the requests
whole, ``SpanRequests``: their spans built only when read). A reader with a request path passes it as
``requests``; any other gets the same spans as records in a ``spans`` batch, so no reader misses the requests'.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from itertools import chain

from sidecar.component import Bus
from sidecar.model import Batch, SpanRequests

__all__ = ["as_spans", "by_name", "named_in", "subscribe_spans"]

Observe = Callable[[Batch], None]

# The bus hands one batch to its subscribers in turn: the last conversion is kept (with the batch it came from, so
# that batch's id cannot be reused meanwhile), and every reader without a request path shares its records.
_last: tuple[Batch, Batch] | None = None
_last_models: tuple[Batch, frozenset[str]] | None = None

# The names a trace file's request's spans may have besides its model's (``sidecar.sources.trace_files.spans``).
_FIXED_NAMES = frozenset(("InferRequest", "compute", "model"))


def as_spans(batch: Batch) -> Batch:
    """A ``span_requests`` batch as the ``spans`` batch of the same spans, in order (built once per batch however
    many readers ask)."""
    global _last
    last = _last
    if last is not None and last[0] is batch:
        return last[1]
    items: tuple[SpanRequests, ...] = batch.items
    out = Batch(
        kind="spans",
        source=batch.source,
        items=tuple(chain.from_iterable(i.spans() for i in items)),
        received_at=batch.received_at,
    )
    _last = (batch, out)
    return out


def named_in(batch: Batch, names: Collection[str]) -> bool:
    """Whether any span of a ``span_requests`` batch could be named in ``names`` (a reader that takes spans by
    name skips a batch with none)."""
    if not _FIXED_NAMES.isdisjoint(names):
        return True
    global _last_models
    last = _last_models
    if last is not None and last[0] is batch:
        models = last[1]
    else:  # the batch's model names, once however many readers ask
        items: tuple[SpanRequests, ...] = batch.items
        models = frozenset(q.model for i in items for q in i.requests)
        _last_models = (batch, models)
    return not models.isdisjoint(names)


def subscribe_spans(
    bus: Bus, name: str, fn: Observe, *, requests: Observe | None = None, source: str | None = None
) -> None:
    """``fn`` gets every ``spans`` batch; ``requests`` every ``span_requests`` batch (default: ``fn`` gets them as
    ``spans`` batches)."""
    bus.subscribe("spans", name, fn, source=source)
    bus.subscribe("span_requests", name, requests or (lambda b: fn(as_spans(b))), source=source)


def by_name(fn: Observe, names: Collection[str]) -> Observe:
    """A request path for a reader that takes only spans named in ``names``: ``fn`` gets a ``span_requests``
    batch's spans only when one of them could be so named."""

    def on_requests(batch: Batch) -> None:
        if named_in(batch, names):
            fn(as_spans(batch))

    return on_requests
