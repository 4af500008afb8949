"""Drift state in the store: rows of windows, histories, pinned collectors, references and since-times.

Every write and read failure is counted (``sidecar_drift_store_errors_total{op}``) and never raised: a broken
store must not stop the check from evaluating what it holds in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import Counter

from sidecar.store import Store

__all__ = ["SEP", "DriftStore", "key"]

SEP = "\x1f"


def key(*parts: str) -> str:
    return SEP.join(parts)


class DriftStore:
    def __init__(self, store: Store, errors: Counter, log: logging.Logger) -> None:
        self.store = store
        self.errors = errors
        self.log = log

    def save(self, ns: str, k: str, value: bytes | str) -> None:
        try:
            self.store.put(ns, k, value)
        except Exception:
            self.errors.labels("write").inc()
            self.log.exception("could not save drift state %s/%s", ns, k)

    def delete(self, ns: str, k: str) -> None:
        try:
            self.store.delete(ns, k)
        except Exception:
            self.errors.labels("write").inc()

    def get(self, ns: str, k: str) -> Any:
        try:
            return self.store.get(ns, k)
        except Exception:
            self.errors.labels("read").inc()
            return None

    def put_many(self, rows: Iterable[tuple[str, str, bytes]]) -> None:
        try:
            self.store.executemany("INSERT OR REPLACE INTO kv (ns, k, v) VALUES (?, ?, ?)", list(rows))
        except Exception:
            self.errors.labels("write").inc()
            self.log.exception("could not persist drift windows")

    def rows(self) -> Iterator[tuple[str, tuple[str, ...], str, Any]]:
        """(namespace, key parts, raw key, value) of every drift row; a failed read counts and yields none."""
        try:
            found = list(self.store.query("SELECT ns, k, v FROM kv WHERE ns LIKE 'drift.%'"))
        except Exception:
            self.errors.labels("read").inc()
            self.log.exception("could not load drift state; starting empty")
            return
        for ns, k, v in found:
            yield ns, tuple(k.split(SEP)), k, v
