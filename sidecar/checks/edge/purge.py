"""Purges are changes, and a purge that did not take is a finding.

A change whose ``what`` reads ``cache purge <scope> <pattern>`` (``POST /v1/changes`` writes it for a posted
``purge``) starts a watch of ``watch_secs``: every cache hit after ``grace_secs`` on a path the pattern covers is
counted per path until the path is fetched from the origin again (a miss: the purge took there, and later hits
serve the fresh copy) (``edge_purge_not_taken``: "purge of /model/weights/v1.3. at 04:00 did not take: 37 hits on
/model/weights/v1.3.7-onnx since"), and a pattern that covers no path seen in the logs (the last ``max_paths``
distinct paths, and every path after it) is named (``edge_purge_unmatched``). Bounded: ``max_purges`` watched
(the oldest dropped, counted), ``max_paths_per_purge`` paths counted per purge.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.edge.config import PurgeWatchConfig
from sidecar.component import Passive, Role
from sidecar.facts_edge import EdgePurgeFacts
from sidecar.model import Batch, Finding
from sidecar.processors.edge_record import EdgeRecord
from sidecar.purge import Purge, parse_purge

__all__ = ["PurgeWatch"]

RUNBOOK = "EdgePurgeNotTaken.md"
OTHER_PATHS = "(other paths)"


@dataclass
class _Watch:
    purge: Purge
    at: float
    who: str
    change_id: str
    matched: bool = False
    hits: dict[str, int] = field(default_factory=dict)
    refilled: set[str] = field(default_factory=set)  # paths fetched from the origin since: their hits are fresh
    total: int = 0
    first_hit_at: float | None = None


class PurgeWatch(Passive):
    name = "edge_purges"
    role = Role.CHECK

    def __init__(self, cfg: PurgeWatchConfig, *, hit_statuses: Sequence[str], registry: CollectorRegistry) -> None:
        self.cfg = cfg
        self._hit = frozenset(s.upper() for s in hit_statuses)
        self._lock = threading.Lock()
        self._paths: OrderedDict[str, None] = OrderedDict()
        self._watches: OrderedDict[str, _Watch] = OrderedDict()
        self.dropped = Counter(
            "sidecar_edge_purges_dropped",
            "Purges no longer watched because max_purges newer ones were (reason max_purges), or hits on more "
            "paths than max_paths_per_purge counted under one row (reason max_paths_per_purge).",
            ["reason"],
            registry=registry,
        )
        self.seen = Counter("sidecar_edge_purges", "Purges received as changes.", registry=registry)
        self._condition = Gauge(
            "sidecar_edge_purge_condition",
            "1 while a watched purge has hits on covered paths (edge_purge_not_taken) or covers no path seen "
            "(edge_purge_unmatched); series of purges no longer watched are removed.",
            ["check", "pattern", "scope"],
            registry=registry,
        )
        self._shown: set[tuple[str, str, str]] = set()

    # ---- intake -------------------------------------------------------------------------------------------
    def on_changes(self, batch: Batch) -> None:
        for c in batch.items:
            p = parse_purge(c.what)
            if p is not None:
                self.add(p, at=c.at, who=c.who, change_id=c.id)

    def add(self, purge: Purge, *, at: float, who: str = "", change_id: str = "") -> None:
        key = change_id or f"{purge.scope}:{purge.pattern}@{at}"
        with self._lock:
            if key in self._watches:
                return
            w = _Watch(purge=purge, at=at, who=who, change_id=change_id)
            w.matched = any(purge.covers(p) for p in self._paths)
            self._watches[key] = w
            self.seen.inc()
            while len(self._watches) > self.cfg.max_purges:
                self._watches.popitem(last=False)
                self.dropped.labels("max_purges").inc()

    def observe(self, records: Sequence[EdgeRecord]) -> None:
        """Per distinct path of the batch: the recency list and which watches cover it; per record only for
        the records on a covered path (a purge covers few of the paths a batch holds)."""
        paths, cap = self._paths, self.cfg.max_paths
        grace, span = self.cfg.grace_secs, self.cfg.watch_secs
        batch_paths = dict.fromkeys(map(itemgetter(1), records))
        with self._lock:
            for path in batch_paths:
                if path in paths:
                    paths.move_to_end(path)
                else:
                    paths[path] = None
            while len(paths) > cap:
                paths.popitem(last=False)
            for w in list(self._watches.values()):
                covered = {p for p in batch_paths if w.purge.covers(p)}
                if not covered:
                    continue
                w.matched = True
                lo, hi = w.at + grace, w.at + span
                for r in records:
                    path = r.path
                    if path not in covered or not lo < r.at <= hi or path in w.refilled:
                        continue
                    if r.cache in self._hit:
                        self._count(w, path, r.at)
                    elif len(w.refilled) < self.cfg.max_paths_per_purge:
                        w.refilled.add(path)  # a miss refetched it: the purge took here, later hits are fresh

    def _count(self, w: _Watch, path: str, at: float) -> None:
        if path not in w.hits and len(w.hits) >= self.cfg.max_paths_per_purge:
            self.dropped.labels("max_paths_per_purge").inc()
            path = OTHER_PATHS
        w.hits[path] = w.hits.get(path, 0) + 1
        w.total += 1
        if w.first_hit_at is None or at < w.first_hit_at:
            w.first_hit_at = at

    # ---- evaluation ---------------------------------------------------------------------------------------
    def evaluate(self, now: float) -> list[Finding]:
        out: list[Finding] = []
        with self._lock:
            for key in [k for k, w in self._watches.items() if now > w.at + self.cfg.watch_secs]:
                del self._watches[key]
            seen = len(self._paths)
            for w in self._watches.values():
                out.extend(self._findings(w, now, seen))
        shown: set[tuple[str, str, str]] = set()
        for f in out:
            series = (f.check, f.labels["pattern"], f.labels["scope"])
            self._condition.labels(*series).set(1 if f.active else 0)
            shown.add(series)
        for series in self._shown - shown:
            self._condition.remove(*series)
        self._shown = shown
        return out

    def _findings(self, w: _Watch, now: float, seen: int) -> list[Finding]:
        labels = {"pattern": w.purge.pattern, "scope": w.purge.scope}
        top_path, top_hits = max(w.hits.items(), key=lambda kv: kv[1], default=("", 0))

        def facts(phase: str) -> EdgePurgeFacts:
            return EdgePurgeFacts(
                phase=phase,
                pattern=w.purge.pattern,
                scope=w.purge.scope,
                who=w.who,
                purged_at=w.at,
                change_id=w.change_id,
                runbook=RUNBOOK,
                hits=w.total,
                paths=len(w.hits),
                top_path=top_path,
                top_hits=top_hits,
                first_hit_at=w.first_hit_at,
                paths_seen=seen,
            )

        return [
            Finding(
                check="edge_purge_not_taken",
                kind="edge_purge",
                labels={**labels, "check": "edge_purge_not_taken"},
                active=w.total >= self.cfg.min_hits,
                value=float(w.total),
                threshold=float(self.cfg.min_hits),
                window_secs=max(0.0, now - w.at),
                evaluated_at=now,
                facts=facts("hits"),
            ),
            Finding(
                check="edge_purge_unmatched",
                kind="edge_purge",
                labels={**labels, "check": "edge_purge_unmatched"},
                active=not w.matched and seen > 0,
                value=float(seen),
                evaluated_at=now,
                severity="info",
                insufficient_data=seen == 0,
                facts=facts("unmatched"),
            ),
        ]
