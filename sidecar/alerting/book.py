"""The alert book: turns each round of findings into alert lifecycles the way Prometheus does
(``rules/alerting.go``): pending until the hold duration passes, then firing, then resolved.

Sending follows Prometheus too: a firing alert is (re-)sent when it starts firing and then every
``resend_delay_secs`` with ``endsAt = now + 4 x max(eval interval, resend delay)``, so Alertmanager resolves
it by itself if the sidecar dies; a resolved alert is sent with ``endsAt`` = when it resolved (in the past)
and re-sent on the same interval for ``resolved_retention_secs``; it stays in the book, shown as resolved, for
``keep_resolved_secs`` (at most ``max_resolved_alerts`` of them, the longest-resolved dropped first, counted).
A firing alert of the same labels replaces it. Notices go to the outbox of
the Alertmanager exporter, which persists them. ``on_transition`` hears "fired", "resolved" and "resent" (a
firing alert's notice queued again after one was already queued, a restored one included; once queued).

A finding with ``insufficient_data`` never fires an alert; it counts as "condition not holding".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import APIRouter, Request
from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.alerting import book_state
from sidecar.alerting.config import AlertingConfig
from sidecar.alerting.render.annotations import Annotator, ChangeLookup, began_at, cited_changes
from sidecar.component import Passive, Role
from sidecar.listparams import ListParams
from sidecar.model import Finding
from sidecar.naming import alert_name, camel_alertname, fingerprint
from sidecar.state.changes import iso
from sidecar.store import Store

__all__ = ["Alert", "AlertBook", "NoticeSink", "camel_alertname", "fingerprint"]


class NoticeSink(Protocol):
    def enqueue(self, notices: Sequence[Mapping[str, Any]]) -> None: ...


@dataclass
class Alert:
    labels: dict[str, str]
    annotations: dict[str, str]
    state: str  # pending | firing | inactive
    active_at: float
    hold_secs: float
    resolved_at: float | None = None
    last_sent_at: float | None = None
    valid_until: float = 0.0
    # Monotonic readings (this process only, never stored): a hold and a resend delay are durations, and a
    # wall-clock step (NTP, a resumed VM) must neither cut a hold short nor stop resends for its size.
    mono_at: float | None = None
    sent_mono: float | None = None
    # A firing notice of this alert was queued (this process, or the one before a restart): the next firing
    # notice is a re-send, reported to ``on_transition`` as "resent".
    fired_sent: bool = False
    # The trace the finding carries (its worst or example request), so the alert's audit rows name it too.
    trace_id: str = ""

    def notice(self, generator_url: str) -> dict[str, Any]:
        """The Alertmanager v2 representation (a postableAlert)."""
        ends = self.resolved_at if self.resolved_at is not None else self.valid_until
        out: dict[str, Any] = {
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": iso(self.active_at),
            "endsAt": iso(ends),
        }
        if generator_url:
            out["generatorURL"] = generator_url
        return out


class AlertBook(Passive):
    name = "alert_book"
    role = Role.SINK

    def __init__(
        self,
        cfg: AlertingConfig,
        *,
        registry: CollectorRegistry,
        eval_interval_secs: float,
        sink: NoticeSink | None,
        recent_changes: ChangeLookup | None = None,
        runbook_base: str,
        dashboard_base: str | None,
        sidecar_url: str,
        logger: logging.Logger | None = None,
        on_transition: Callable[[str, Alert, float], None] | None = None,
        store: Store | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.cfg = cfg
        self._mono = monotonic
        self.sink = sink
        self.recent_changes = recent_changes
        self.eval_interval = eval_interval_secs
        self.annotator = Annotator(
            cfg.templates,
            registry=registry,
            runbook_base=runbook_base,
            dashboard_base=dashboard_base,
            sidecar_url=sidecar_url,
        )
        self.sidecar_url = sidecar_url.rstrip("/")
        self.log = logger or logging.getLogger("sidecar.alert_book")
        self.on_transition = on_transition
        self.alerts: dict[str, Alert] = {}
        self._lock = threading.Lock()
        self._gauge = Gauge("sidecar_alerts", "Alerts in the book, by state.", ["state"], registry=registry)
        self._refused = Counter(
            "sidecar_alerts_refused",
            "New alerts refused because max_active_alerts was reached.",
            registry=registry,
        )
        self._notices = Counter(
            "sidecar_alert_notices", "Notices handed to delivery, by state.", ["state"], registry=registry
        )
        for s in ("pending", "firing", "resolved"):
            self._gauge.labels(s).set(0)
        self._resolved_evicted = Counter(
            "sidecar_alerts_resolved_evicted",
            "Resolved alerts dropped from the book before keep_resolved_secs, because more than "
            "max_resolved_alerts were resolved.",
            registry=registry,
        )
        self._store_errors = Counter(
            "sidecar_alert_book_store_errors",
            "Failures reading or writing the alert book's state in the embedded store, by op (read, write, "
            "decode: an unreadable stored alert, skipped). Alerting goes on from memory.",
            ["op"],
            registry=registry,
        )
        self._unqueued = Counter(
            "sidecar_alert_notices_unqueued",
            "Notices the delivery queue could not take (its store failed); each is retried the next round.",
            registry=registry,
        )
        self.store = store
        self._lists = ListParams.of(registry)
        self._saved: dict[str, tuple[Any, ...]] = {}
        self._restore()

    def _restore(self) -> None:
        """Take the alerts a previous process left in the store: firing ones keep firing with their original
        activeAt (startsAt), pending ones keep their elapsed hold."""
        if self.store is None:
            return
        try:
            rows, bad = book_state.load(self.store, self.log)
            if bad:
                self._store_errors.labels("decode").inc(bad)
            stale = [k for k in self.store.keys(book_state.NS) if k not in rows]
            book_state.delete(self.store, stale)
        except Exception:
            self._store_errors.labels("read").inc()
            self.log.exception("could not read the alert book's state; starting empty")
            return
        for fp, fields in rows.items():
            a = Alert(**fields)
            self.alerts[fp] = a
            self._saved[fp] = self._row(a)
            # Re-send on the first round: a notice the old process queued may not have left it (Alertmanager
            # de-duplicates a repeat, and the original activeAt keeps startsAt).
            a.last_sent_at = None
            a.fired_sent = a.state == "firing"

    @staticmethod
    def _row(a: Alert) -> tuple[Any, ...]:
        return (
            a.state,
            a.active_at,
            a.hold_secs,
            a.resolved_at,
            a.last_sent_at,
            a.valid_until,
            tuple(sorted(a.annotations.items())),
        )

    def _persist(self) -> None:
        """Write what changed this round (the lock is held; the book is bounded by max_active_alerts)."""
        if self.store is None:
            return
        changed = [(fp, a) for fp, a in self.alerts.items() if self._saved.get(fp) != self._row(a)]
        gone = [fp for fp in self._saved if fp not in self.alerts]
        try:
            book_state.save(self.store, changed)
            book_state.delete(self.store, gone)
        except Exception:
            self._store_errors.labels("write").inc()
            self.log.exception("could not save the alert book's state (alerting goes on from memory)")
            return
        for fp, a in changed:
            self._saved[fp] = self._row(a)
        for fp in gone:
            del self._saved[fp]

    # -- lifecycle -------------------------------------------------------------------------------------------
    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.get("/v1/alerts")
        async def get_alerts(request: Request) -> list[dict[str, Any]]:
            """Every alert in the book; ``limit`` (1 to 1000) keeps the first ones. Refused (400): what
            sidecar.listparams refuses."""
            q = self._lists.parse("/v1/alerts", request, (), default_limit=None)
            with self._lock:
                out = [{**a.notice(""), "state": a.state} for a in self.alerts.values()]
            return out if q.limit is None else out[: q.limit]

        return router

    # -- evaluation ------------------------------------------------------------------------------------------
    def _hold(self, f: Finding) -> float:
        if f.check in self.cfg.for_secs:
            return self.cfg.for_secs[f.check]
        if f.for_secs is not None:
            return f.for_secs
        return self.cfg.default_for_secs

    def _labels(self, f: Finding) -> dict[str, str]:
        labels = {k: v for k, v in f.labels.items() if v != ""}
        labels.setdefault("alertname", alert_name(f.check, f.kind, labels))
        labels["check"] = f.check
        labels["severity"] = f.severity
        return labels

    def _held(self, a: Alert, now: float, mono: float) -> float:
        if a.mono_at is None:
            # Restored from the store: credit the wall time held before the restart once, then go monotonic.
            a.mono_at = mono - max(0.0, now - a.active_at)
        return mono - a.mono_at

    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        notices: list[tuple[str, dict[str, Any], bool]] = []
        # Without a monotonic clock (unit tests that drive the book with explicit times) durations use ``now``.
        mono = self._mono() if self._mono is not None else now
        with self._lock:
            seen: set[str] = set()
            for f in findings:
                labels = self._labels(f)
                fp = fingerprint(labels)
                seen.add(fp)
                a = self.alerts.get(fp)
                if f.active and not f.insufficient_data:
                    if a is None or a.state == "inactive":
                        if self._count_active() >= self.cfg.max_active_alerts:
                            self._refused.inc()
                            continue
                        a = self.alerts[fp] = Alert(
                            labels=labels,
                            annotations={},
                            state="pending",
                            active_at=now,
                            hold_secs=self._hold(f),
                            mono_at=mono,
                        )
                    changes = cited_changes(
                        self.recent_changes, labels, began_at(f, a.active_at), self.cfg.changes, self.log
                    )
                    a.annotations = self.annotator.annotate(f, labels, changes)
                    a.trace_id = f.trace_id or a.trace_id
                    if a.state == "pending" and self._held(a, now, mono) >= a.hold_secs:
                        a.state = "firing"
                        self._transition("fired", a, now)
                elif a is not None:
                    self._deactivate(fp, a, now)
            for fp, a in list(self.alerts.items()):
                if fp not in seen and a.state != "inactive":
                    self._deactivate(fp, a, now)  # the series vanished: Prometheus resolves it too
                if a.state == "inactive" and a.resolved_at is not None and now - a.resolved_at > self._keep_secs:
                    del self.alerts[fp]
            self._bound_resolved()
            notices = self._due(now, mono)
            counts = {"pending": 0, "firing": 0, "resolved": 0}
            for a in self.alerts.values():
                counts["resolved" if a.state == "inactive" else a.state] += 1
            for s, n in counts.items():
                self._gauge.labels(s).set(n)
            self._persist()
        if notices and self.sink is not None:
            try:
                self.sink.enqueue([n for _, n, _ in notices])
            except Exception:
                # Not queued (the outbox's store failed): not sent either, so due again next round instead of
                # one resend delay later; Alertmanager de-duplicates a notice that did get through.
                self._unqueued.inc(len(notices))
                self.log.exception("could not queue %d notices; retrying next round", len(notices))
                with self._lock:
                    for fp, _, resend in notices:
                        a = self.alerts.get(fp)
                        if a is not None:
                            a.last_sent_at = a.sent_mono = None
                            a.fired_sent = resend  # a first send not queued is still a first send
                    self._persist()
                return
            self._report_resends(notices, now)

    def _report_resends(self, notices: Sequence[tuple[str, dict[str, Any], bool]], now: float) -> None:
        # Outside the lock, once queued: the audit writes to SQLite, and a re-send not queued did not happen.
        for fp, _, resend in notices:
            a = self.alerts.get(fp)
            if resend and a is not None:
                self._transition("resent", a, now)

    @property
    def _keep_secs(self) -> float:
        return max(self.cfg.keep_resolved_secs, self.cfg.resolved_retention_secs)

    def _bound_resolved(self) -> None:
        """At most ``max_resolved_alerts`` resolved alerts: the longest-resolved go first, counted."""
        resolved = [(a.resolved_at or 0.0, fp) for fp, a in self.alerts.items() if a.state == "inactive"]
        over = len(resolved) - self.cfg.max_resolved_alerts
        if over > 0:
            for _, fp in sorted(resolved)[:over]:
                del self.alerts[fp]
            self._resolved_evicted.inc(over)

    def _count_active(self) -> int:
        return sum(1 for a in self.alerts.values() if a.state != "inactive")

    def _deactivate(self, fp: str, a: Alert, now: float) -> None:
        if a.state == "pending":
            del self.alerts[fp]
        elif a.state == "firing":
            a.state = "inactive"
            a.resolved_at = now
            self._transition("resolved", a, now)

    def _transition(self, what: str, a: Alert, now: float) -> None:
        if self.on_transition is not None:
            try:
                self.on_transition(what, a, now)
            except Exception:
                self.log.exception("transition hook failed")

    def _due(self, now: float, mono: float) -> list[tuple[str, dict[str, Any], bool]]:
        """The notices due now: (fingerprint, notice, whether it re-sends a firing alert already sent)."""
        out = []
        valid = now + 4 * max(self.eval_interval, self.cfg.resend_delay_secs)
        gen = self.sidecar_url + "/v1/alerts" if self.sidecar_url else ""
        for fp, a in self.alerts.items():
            if a.state == "pending":
                continue
            if a.resolved_at is not None and now - a.resolved_at > self.cfg.resolved_retention_secs:
                continue  # kept to be shown, no longer re-sent (a restart does not send it again either)
            due = (
                a.last_sent_at is None
                or a.sent_mono is None
                or (a.resolved_at is not None and a.resolved_at > a.last_sent_at)
                or mono - a.sent_mono >= self.cfg.resend_delay_secs
            )
            if not due:
                continue
            a.last_sent_at = now
            a.sent_mono = mono
            resend = False
            if a.state == "firing":
                a.valid_until = valid
                resend, a.fired_sent = a.fired_sent, True
            out.append((fp, a.notice(gen), resend))
            self._notices.labels("firing" if a.state == "firing" else "resolved").inc()
        return out
