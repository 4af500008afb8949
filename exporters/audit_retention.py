"""Which audit rows make room for which: every kind has its own budget, so one kind can never evict another.

The audit trail holds five classes of rows: ``requests`` (per-request records: many, and the cheapest to lose),
``alerts`` (``alert_*``), ``changes`` (``change``), ``findings`` (``finding_*``) and ``actions`` (``action_*`` and
any other kind). Each class has its own ``max_rows`` and ``max_bytes``; when a class is over either, its own
oldest rows go (counted in ``sidecar_audit_events_evicted_total{why,kind}``), so a flood of request records
evicts only request records, never the alert or change history.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLASSES", "CLASS_SQL", "Budget", "class_of", "uniform"]

CLASSES = ("requests", "alerts", "changes", "findings", "actions")

# The same mapping as ``class_of``, for filling the column of rows written before it existed.
CLASS_SQL = (
    "CASE WHEN kind = 'request' THEN 'requests' WHEN kind LIKE 'alert\\_%' ESCAPE '\\' THEN 'alerts' "
    "WHEN kind = 'change' THEN 'changes' WHEN kind LIKE 'finding\\_%' ESCAPE '\\' THEN 'findings' "
    "ELSE 'actions' END"
)


@dataclass(frozen=True)
class Budget:
    max_rows: int
    max_bytes: int

    def __post_init__(self) -> None:
        if self.max_rows < 1 or self.max_bytes < 1:
            raise ValueError(f"a budget must be positive, got {self}")


def class_of(kind: str) -> str:
    """The retention class of an audit event kind."""
    if kind == "request":
        return "requests"
    if kind.startswith("alert_"):
        return "alerts"
    if kind == "change":
        return "changes"
    if kind.startswith("finding_"):
        return "findings"
    return "actions"


def uniform(max_rows: int, max_bytes: int) -> dict[str, Budget]:
    """The same budget for every class."""
    return {c: Budget(max_rows, max_bytes) for c in CLASSES}
