"""What every push endpoint answers when a bus subscriber failed on the batch it published.

``Bus.publish`` returns the names of the subscribers that raised. A push endpoint that got a non-empty list
must not acknowledge the batch: it answers **500** with a reason naming the failed subscribers, and the failure
is counted in ``sidecar_push_subscriber_failures_total{endpoint}`` (one per request). A failed subscriber is a
bug or a broken store, never the client's data, so the client learns that its batch was not taken, and the
operator has a counter to alert on. What the other subscribers took of the batch is kept (publishing is not a
transaction); whether a resend is safe is the endpoint's own promise (``POST /v1/changes`` is idempotent).

FastAPI endpoints answer ``{"detail": reason, "failed_subscribers": [...]}``; the OTLP receiver answers its
protocol's ``google.rpc.Status`` with the same reason as its message (``SubscriberFailure.message``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter
from starlette.responses import JSONResponse

__all__ = ["PushFailures", "SubscriberFailure"]

STATUS = 500


@dataclass(frozen=True)
class SubscriberFailure:
    endpoint: str
    failed: tuple[str, ...]

    @property
    def status(self) -> int:
        return STATUS

    @property
    def message(self) -> str:
        names = ", ".join(self.failed)
        return (
            f"{self.endpoint}: the batch was not taken: subscriber{'s' if len(self.failed) > 1 else ''} {names} "
            "failed on it (a fault in the sidecar, see its log; what other subscribers took is kept)"
        )

    def body(self) -> dict[str, object]:
        return {"detail": self.message, "failed_subscribers": list(self.failed)}

    def response(self) -> JSONResponse:
        return JSONResponse(status_code=self.status, content=self.body())


class PushFailures:
    """Turns ``Bus.publish``'s failed-subscriber list into the one answer every push endpoint gives."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._failures = Counter(
            "sidecar_push_subscriber_failures",
            "Push requests answered 500 because a bus subscriber failed on their batch, by endpoint.",
            ["endpoint"],
            registry=registry,
        )

    def check(self, endpoint: str, failed: Sequence[str]) -> SubscriberFailure | None:
        """None when every subscriber took the batch; otherwise the failure, counted."""
        if not failed:
            return None
        self._failures.labels(endpoint).inc()
        return SubscriberFailure(endpoint, tuple(dict.fromkeys(failed)))
