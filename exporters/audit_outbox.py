"""The embedded store's side of Elasticsearch delivery: the replay queue and the dead-letter table.

``AuditOutbox`` is a durable ``SendQueue``: every audit event bound for Elasticsearch is a row of
``audit_es_outbox``, written in the same transaction as the audit row itself, so an event the sidecar has
acknowledged (committed) survives a kill -9 and is sent after the restart. The sender reads the head in
``seq`` order (the order events were recorded) and deletes rows once Elasticsearch has answered for them, so
while Elasticsearch is down the events wait on disk and memory holds one batch at most.

The queue is bounded (``max_rows``). When it is full, ``overflow`` decides: ``drop_oldest`` deletes the oldest
waiting rows to make room (the audit rows stay in SQLite; only their copy for Elasticsearch is lost),
``refuse_new`` keeps the queue and refuses the new event's copy. Either way it is counted
(``sidecar_export_dropped_total{exporter="elasticsearch",reason="queue_full"}``).

``DeadLetters`` keeps documents Elasticsearch refused for good (a mapping conflict, say) with the status and
reason it gave, bounded (the oldest go first, counted), so an operator can see and replay them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from prometheus_client import CollectorRegistry, Counter

from sidecar.store import Store

__all__ = ["AuditOutbox", "DeadLetters", "EsDoc"]

Overflow = Literal["drop_oldest", "refuse_new"]


@dataclass(frozen=True)
class EsDoc:
    seq: int
    id: str
    index: str
    body: bytes  # the JSON document, encoded once


class AuditOutbox:
    durable = True

    def __init__(self, store: Store, *, max_rows: int, overflow: Overflow = "drop_oldest") -> None:
        self.store = store
        self.max_rows = max_rows
        self.overflow = overflow
        store.execute(
            "CREATE TABLE IF NOT EXISTS audit_es_outbox "
            "(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, idx TEXT, body BLOB)"
        )
        self._len = int(store.query("SELECT COUNT(*) FROM audit_es_outbox")[0][0])

    def __len__(self) -> int:
        return self._len

    def reload(self) -> None:
        """Count the rows again (after the caller's transaction rolled back a ``put``)."""
        self._len = int(self.store.query("SELECT COUNT(*) FROM audit_es_outbox")[0][0])

    def put(self, items: Sequence[Any]) -> int:
        """Queue ``(id, index, body)`` tuples; call inside the audit row's transaction. Returns how many were
        dropped for room (the oldest, or the new ones with ``refuse_new``)."""
        dropped = 0
        with self.store.transaction():
            n = len(items)
            over = self._len + n - self.max_rows
            if over > 0 and self.overflow == "refuse_new":
                keep = max(0, n - over)
                dropped, items = n - keep, items[:keep]
            elif over > 0:
                dropped = self.store.execute(
                    "DELETE FROM audit_es_outbox WHERE seq IN (SELECT seq FROM audit_es_outbox ORDER BY seq LIMIT ?)",
                    (over,),
                )
                self._len -= dropped
            for doc_id, index, body in items:
                self.store.execute(
                    "INSERT INTO audit_es_outbox (id, idx, body) VALUES (?, ?, ?)", (doc_id, index, body)
                )
            self._len += len(items)
        return dropped

    def head(self, n: int) -> list[EsDoc]:
        rows = self.store.query("SELECT seq, id, idx, body FROM audit_es_outbox ORDER BY seq LIMIT ?", (n,))
        return [EsDoc(int(r[0]), str(r[1]), str(r[2]), bytes(r[3])) for r in rows]

    def settle(self, batch: list[EsDoc], keep: list[EsDoc]) -> None:
        kept = {d.seq for d in keep}
        gone = [(d.seq,) for d in batch if d.seq not in kept]
        if gone:
            self.store.executemany("DELETE FROM audit_es_outbox WHERE seq = ?", gone)
        self.reload()

    def clear(self) -> int:
        n = self.store.execute("DELETE FROM audit_es_outbox")
        self._len = 0
        return n


class DeadLetters:
    def __init__(self, store: Store, *, max_rows: int, registry: CollectorRegistry) -> None:
        self.store = store
        self.max_rows = max_rows
        store.execute(
            "CREATE TABLE IF NOT EXISTS audit_es_dead_letters "
            "(id TEXT PRIMARY KEY, idx TEXT, at REAL, status INTEGER, reason TEXT, body BLOB)"
        )
        self._added = Counter(
            "sidecar_elasticsearch_dead_letters",
            "Documents Elasticsearch refused for good, kept in the dead-letter table.",
            registry=registry,
        )
        self._evicted = Counter(
            "sidecar_elasticsearch_dead_letters_evicted",
            "Oldest dead letters deleted to stay under the cap.",
            registry=registry,
        )

    def add(self, doc: EsDoc, at: float, status: int, reason: str) -> None:
        with self.store.transaction():
            self.store.execute(
                "INSERT OR REPLACE INTO audit_es_dead_letters (id, idx, at, status, reason, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (doc.id, doc.index, at, status, reason[:1000], doc.body),
            )
            over = int(self.store.query("SELECT COUNT(*) FROM audit_es_dead_letters")[0][0]) - self.max_rows
            if over > 0:
                self.store.execute(
                    "DELETE FROM audit_es_dead_letters WHERE id IN "
                    "(SELECT id FROM audit_es_dead_letters ORDER BY at LIMIT ?)",
                    (over,),
                )
                self._evicted.inc(over)
        self._added.inc()

    def rows(self, limit: int = 100) -> list[dict[str, Any]]:
        out = []
        for r in self.store.query(
            "SELECT id, idx, at, status, reason, body FROM audit_es_dead_letters ORDER BY at DESC LIMIT ?", (limit,)
        ):
            out.append(
                {"id": r[0], "index": r[1], "at": r[2], "status": r[3], "reason": r[4], "doc": orjson.loads(r[5])}
            )
        return out
