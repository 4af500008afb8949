"""The Elasticsearch mapping is ``dynamic: false``: a field the audit writes but the mapping lacks is kept in
``_source`` but cannot be searched or filtered. Every field the alert audit rows carry must be mapped (or be
named here as deliberately left unsearchable)."""

from __future__ import annotations

from typing import Any

from exporters.alertmanager import DeliveryOutcome
from exporters.es_template import MAPPINGS
from sidecar.alerting.book import Alert
from sidecar.wiring.alert_audit import delivery_recorder, transition_recorder

# Kept in _source, never filtered on: the ISO rendering of ``at`` (``at`` itself is the mapped date).
UNSEARCHABLE = {"at_iso"}


class _Capture:
    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []

    def record(self, kind: str, event_id: str, at: float, body: dict[str, Any]) -> bool:
        self.bodies.append((kind, body))
        return True

    def record_many(self, rows: list[tuple[str, str, float, dict[str, Any]]]) -> int:
        for kind, _id, _at, body in rows:
            self.bodies.append((kind, body))
        return len(rows)


def test_every_field_of_the_alert_audit_rows_is_mapped() -> None:
    cap = _Capture()
    alert = Alert(
        labels={"alertname": "X", "model": "m"},
        annotations={"summary": "s"},
        state="firing",
        active_at=1_800_000_000.0,
        hold_secs=0.0,
    )
    on_transition = transition_recorder(cap, 600.0, 10)  # type: ignore[arg-type]
    on_transition("fired", alert, 1_800_000_010.0)
    on_transition("resent", alert, 1_800_000_700.0)
    delivery_recorder(cap)(
        [  # type: ignore[arg-type]
            DeliveryOutcome(
                "delivery_failed",
                "http://am:9093",
                "f",
                {"labels": {"alertname": "X"}, "startsAt": "2027-01-15T08:00:00Z", "endsAt": "2027-01-15T09:00:00Z"},
                "d",
                3,
                "http_400: bad label",
                400,
                1_800_000_020.0,
            )
        ]
    )
    kinds = {k for k, _ in cap.bodies}
    assert kinds == {"alert_fired", "alert_resent", "alert_delivery_failed"}
    mapped = set(MAPPINGS["properties"]) | UNSEARCHABLE
    missing = {(k, f) for k, body in cap.bodies for f in body if f not in mapped}
    assert not missing, f"audit fields the index template does not map: {sorted(missing)}"
