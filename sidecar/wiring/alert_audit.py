"""Alerts in the audit trail: the book's transitions (fired, re-sent, resolved) and the Alertmanager
exporter's delivery outcomes become audit rows. Wiring owns this translation because the book (alerting) and
the exporter may not import each other, nor the audit log."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime

from exporters.alertmanager import DeliveryOutcome
from exporters.audit import AuditLog
from sidecar.alerting.book import Alert
from sidecar.naming import fingerprint
from sidecar.state.changes import iso

__all__ = ["delivery_recorder", "transition_recorder"]


def transition_recorder(
    audit: AuditLog, resent_every_secs: float, max_alerts: int
) -> Callable[[str, Alert, float], None]:
    """The book's ``on_transition``. Ids are deterministic (labels + when the alert became active, and for a
    re-send its window), so a restart or a replay never duplicates a row."""
    # Windows already recorded, so the re-sends inside one cost no write; bounded like the book.
    recorded: dict[str, int] = {}

    def on_transition(what: str, alert: Alert, now: float) -> None:
        key = f"{fingerprint(alert.labels)}-{int(alert.active_at * 1000)}"
        body = {"labels": alert.labels, "annotations": alert.annotations, "at_iso": iso(now)}
        if alert.trace_id:
            body["trace_id"] = alert.trace_id  # the audit's trace_id column: /audit?trace_id= finds the alert
        if what != "resent":
            audit.record(f"alert_{what}", f"{what}-{key}", now, body)
            return
        window = int(max(0.0, now - alert.active_at) // resent_every_secs)
        if recorded.get(key) == window:
            return
        if len(recorded) >= max_alerts:
            recorded.clear()  # only costs writes the store ignores (the ids repeat)
        recorded[key] = window
        audit.record(
            "alert_resent",
            f"resent-{key}-{window}",
            now,
            {**body, "active_at": alert.active_at, "window": window, "window_secs": resent_every_secs},
        )

    return on_transition


def _state(notice: dict[str, object], at: float) -> str:
    # As Alertmanager reads it: an endsAt already past means resolved (a firing notice delivered after an
    # outage longer than its endsAt margin is one).
    try:
        ends = datetime.fromisoformat(str(notice.get("endsAt", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "unknown"
    return "resolved" if ends <= at else "firing"


def delivery_recorder(audit: AuditLog) -> Callable[[Sequence[DeliveryOutcome]], None]:
    """The Alertmanager exporter's ``on_outcome``: one row per notice and Alertmanager, in one transaction."""

    def on_outcome(outcomes: Sequence[DeliveryOutcome]) -> None:
        rows = []
        for o in outcomes:
            notice = dict(o.notice)
            am = hashlib.sha256(o.alertmanager.encode()).hexdigest()[:12]
            rows.append(
                (
                    f"alert_{o.what}",
                    f"{o.what}-{am}-{o.fingerprint}-{o.digest}-{int(o.at * 1000)}",
                    o.at,
                    {
                        "labels": notice.get("labels", {}),
                        "annotations": notice.get("annotations", {}),
                        "starts_at": notice.get("startsAt"),
                        "ends_at": notice.get("endsAt"),
                        "state": _state(notice, o.at),
                        "alertmanager": o.alertmanager,
                        "attempts": o.attempts,
                        "reason": o.reason,
                        "status": o.status,
                        "at_iso": iso(o.at),
                    },
                )
            )
        audit.record_many(rows)

    return on_outcome
