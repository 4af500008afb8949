"""Pinned token-length references in the store, so a restart does not capture them again from traffic that may
already have shifted (as the drift check keeps its pinned references). Rows ``tokens.ref`` keyed by server, model,
version and direction; bounded (oldest first out); every store failure is counted, never raised."""

from __future__ import annotations

import logging
from collections import OrderedDict

import orjson
from prometheus_client import Counter

from sidecar.checks.tokens.hist import Bins
from sidecar.checks.tokens.reference import TokenReference
from sidecar.store import Store

__all__ = ["NS", "PinnedRefs"]

NS = "tokens.ref"
_SEP = "\x1f"
RefKey = tuple[str, str, str, str]  # (server, model, version, direction)


class PinnedRefs:
    def __init__(self, store: Store | None, *, max_refs: int, errors: Counter, log: logging.Logger) -> None:
        self.store = store
        self.max_refs = max_refs
        self.errors = errors
        self.log = log
        self.refs: OrderedDict[RefKey, TokenReference] = OrderedDict()
        self._load()

    def _load(self) -> None:
        if self.store is None:
            return
        try:
            rows = self.store.query("SELECT k, v FROM kv WHERE ns = ? ORDER BY rowid", (NS,))
        except Exception:
            self.errors.labels("read_error").inc()
            self.log.exception("could not load the pinned token-length references; capturing them again")
            return
        for k, v in rows[-self.max_refs :]:
            parts = str(k).split(_SEP)
            try:
                doc = orjson.loads(v)
                bins = Bins(tuple(float(e) for e in doc["edges"]), [float(c) for c in doc["counts"]], float(doc["sum"]))
                if len(parts) != 4 or len(bins.counts) != len(bins.edges) + 1:
                    raise ValueError("shape")
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
                self.errors.labels("read_error").inc()
                continue
            self.refs[(parts[0], parts[1], parts[2], parts[3])] = TokenReference(bins, "pinned", str(doc.get("id", "")))

    def get(self, key: RefKey) -> TokenReference | None:
        return self.refs.get(key)

    def put(self, key: RefKey, ref: TokenReference) -> None:
        self.refs[key] = ref
        row = orjson.dumps({"edges": ref.bins.edges, "counts": ref.bins.counts, "sum": ref.bins.sum, "id": ref.id})
        self._write(_SEP.join(key), row)
        while len(self.refs) > self.max_refs:  # bounded: the oldest reference goes first
            old, _ = self.refs.popitem(last=False)
            self.errors.labels("evicted").inc()
            self._write(_SEP.join(old), None)

    def drop(self, key: RefKey) -> None:
        if self.refs.pop(key, None) is not None:
            self._write(_SEP.join(key), None)

    def _write(self, k: str, row: bytes | None) -> None:
        """Save (or, with no row, delete) one row; a failure is counted and logged."""
        if self.store is None:
            return
        try:
            if row is None:
                self.store.delete(NS, k)
            else:
                self.store.put(NS, k, row)
        except Exception:
            self.errors.labels("write_error").inc()
            self.log.exception("could not save a pinned token-length reference")
