"""The Alertmanager outbox: a durable ``SendQueue`` in the embedded store, one per Alertmanager.

Rows are keyed by the alert's label fingerprint: a newer notice of the same alert replaces the older one,
because Alertmanager only needs an alert's latest state. So the outbox is bounded by the number of alerts (and
``max_items``), and it survives a restart or kill -9: whatever is in it is sent when the sidecar is back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from sidecar.clock import Clock
from sidecar.naming import fingerprint
from sidecar.store import Store

__all__ = ["OutboxQueue", "OutboxRow"]

TABLE = "alertmanager_outbox"


class OutboxRow(NamedTuple):
    fp: str
    seq: int
    payload: bytes


class OutboxQueue:
    durable = True

    def __init__(
        self,
        store: Store,
        am: str,
        *,
        max_items: int,
        clock: Clock,
        on_refused: Callable[[int], None] = lambda n: None,
    ) -> None:
        self.store = store
        self.am = am
        self.max_items = max_items
        self.clock = clock
        self._on_refused = on_refused
        store.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (am TEXT, fp TEXT, seq INTEGER, payload BLOB, "
            "queued_at REAL, PRIMARY KEY (am, fp))"
        )
        rows = store.query(f"SELECT MAX(seq) FROM {TABLE} WHERE am = ?", (am,))
        self._seq = int(rows[0][0] or 0)

    def __len__(self) -> int:
        return int(self.store.query(f"SELECT COUNT(*) FROM {TABLE} WHERE am = ?", (self.am,))[0][0])

    def put(self, items: Sequence[Mapping[str, Any]]) -> int:
        """Queue notices (a queued notice of the same alert is replaced); returns how many were refused."""
        now = self.clock.now()
        present = {r[0] for r in self.store.query(f"SELECT fp FROM {TABLE} WHERE am = ?", (self.am,))}
        rows, refused = [], 0
        for n in items:
            fp = fingerprint(n["labels"])
            if fp not in present and len(present) >= self.max_items:
                refused += 1
                continue
            present.add(fp)
            self._seq += 1
            rows.append((self.am, fp, self._seq, orjson.dumps(n), now))
        if rows:
            self.store.executemany(
                f"INSERT OR REPLACE INTO {TABLE} (am, fp, seq, payload, queued_at) VALUES (?, ?, ?, ?, ?)", rows
            )
        if refused:
            self._on_refused(refused)
        return refused

    def head(self, n: int) -> list[OutboxRow]:
        rows = self.store.query(f"SELECT fp, seq, payload FROM {TABLE} WHERE am = ? ORDER BY seq LIMIT ?", (self.am, n))
        return [OutboxRow(str(r[0]), int(r[1]), bytes(r[2])) for r in rows]

    def settle(self, batch: list[OutboxRow], keep: list[OutboxRow]) -> None:
        # Only the exact versions sent: a notice replaced meanwhile has a new seq and stays queued.
        kept = set(keep)
        self.store.executemany(
            f"DELETE FROM {TABLE} WHERE am = ? AND fp = ? AND seq = ?",
            [(self.am, r.fp, r.seq) for r in batch if r not in kept],
        )

    def clear(self) -> int:
        n = len(self)
        self.store.execute(f"DELETE FROM {TABLE} WHERE am = ?", (self.am,))
        return n

    def pending(self) -> list[dict[str, Any]]:
        """The notices waiting, oldest first."""
        return [orjson.loads(r.payload) for r in self.head(self.max_items + 1)]
