"""The alert book's state in the embedded store, so a restart neither resolves a firing alert nor restarts a
pending one's hold.

Without it a restarted sidecar starts with an empty book: a firing alert is pending again for its whole hold
(``for_secs``); once that is longer than the ``endsAt`` margin it sent (4 x max(eval interval, resend
delay)), Alertmanager resolves the alert and pages again when it fires anew. Prometheus solves the same
problem with its ``ALERTS_FOR_STATE`` series; here each alert is one row (namespace ``alerting.book``, key
the fingerprint), written when it changes and read once at start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from sidecar.store import Store

__all__ = ["NS", "delete", "load", "save"]

NS = "alerting.book"
_FIELDS = ("labels", "annotations", "state", "active_at", "hold_secs", "resolved_at", "last_sent_at", "valid_until")


def save(store: Store, alerts: Iterable[tuple[str, Any]]) -> None:
    """Write each (fingerprint, alert) in one transaction."""
    rows = [(NS, fp, orjson.dumps({**{f: getattr(a, f) for f in _FIELDS}, "trace_id": a.trace_id})) for fp, a in alerts]
    if rows:
        store.executemany("INSERT OR REPLACE INTO kv (ns, k, v) VALUES (?, ?, ?)", rows)


def delete(store: Store, fingerprints: Iterable[str]) -> None:
    rows = [(NS, fp) for fp in fingerprints]
    if rows:
        store.executemany("DELETE FROM kv WHERE ns = ? AND k = ?", rows)


def load(store: Store, log: logging.Logger) -> tuple[dict[str, Mapping[str, Any]], int]:
    """The stored alerts' fields by fingerprint, and how many rows could not be read (skipped, not fatal:
    one bad row must not keep the book from starting)."""
    out: dict[str, Mapping[str, Any]] = {}
    bad = 0
    for fp, raw in store.query("SELECT k, v FROM kv WHERE ns = ?", (NS,)):
        try:
            doc = orjson.loads(raw)
            if not isinstance(doc, dict) or doc.get("state") not in ("pending", "firing", "inactive"):
                raise ValueError("not an alert")
            fields = {f: doc[f] for f in _FIELDS}
            if not isinstance(fields["labels"], dict) or not isinstance(fields["annotations"], dict):
                raise ValueError("labels/annotations are not maps")
            for f in ("active_at", "hold_secs", "valid_until"):
                fields[f] = float(fields[f])
            for f in ("resolved_at", "last_sent_at"):
                fields[f] = None if fields[f] is None else float(fields[f])
            fields["trace_id"] = str(doc.get("trace_id") or "")  # rows stored before it carry none
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            bad += 1
            log.warning("skipping an unreadable stored alert %s", fp)
            continue
        out[fp] = fields
    return out, bad
