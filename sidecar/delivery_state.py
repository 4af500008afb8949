"""The one word for how delivery to an Alertmanager stands, for every screen that says it: ``/readyz`` (the
Alertmanager exporter's readiness detail) and the delivery table of ``/alerts`` and ``/``. Core, so both the
exporter and the pages can use it; it depends on nothing of ours."""

from __future__ import annotations

__all__ = ["STATES", "delivery_state"]

STATES = {
    "failing": "notices are queued and POSTs have failed",
    "queued": "notices wait for the next send",
    "delivered": "nothing waits",
    "idle": "nothing sent yet",
}


def delivery_state(*, queued: float, failed: bool, sent: float) -> str:
    """``failing`` (notices wait and POSTs failed), ``queued``, ``delivered`` or ``idle``."""
    if queued and failed:
        return "failing"
    if queued:
        return "queued"
    return "delivered" if sent else "idle"
