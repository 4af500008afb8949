"""Join Triton's failure counters into traces, because Triton's own spans never carry an error status.

Every ``interval_secs`` the counter ``nv_inference_request_failure`` (summed over ``reason``) is read per
model
and version. An increase of N between two reads means N requests of that model and version failed in that
interval; ``TraceStore.mark_failures`` then marks the traced requests of the interval: *failed* when N
covers all of
them, *possibly failed* otherwise (a counter cannot say which request failed). Intervals are applied one round
late, because Triton's OTLP exporter batches spans for seconds after the request ends.

Only the one metric family is needed, so the exposition is filtered line by line with a regex rather than run
through a full parser (Triton's exposition has thousands of series we would parse for nothing); the label
lists of the lines kept are read by ``sidecar.promtext.parse_labels``, and a line that does not parse is
skipped.
"""

from __future__ import annotations

import logging
import re
from collections import deque

import httpx
from prometheus_client import CollectorRegistry, Counter

from sidecar.clock import Clock
from sidecar.errors import ScrapeError
from sidecar.polled import Polled, TickerFactory
from sidecar.promtext import parse_labels
from sidecar.scrape import fetch_exposition
from sidecar.sources.triton_failures_config import FailureJoinConfig
from sidecar.state.trace_hub import TraceHub

__all__ = ["FailureJoin", "failure_counts"]

# The label part runs to the line's last "}" (a "}" may sit inside a quoted value); sidecar.promtext reads it.
_LINE = re.compile(r"^nv_inference_request_failure\{([^\n]*)\}[ \t]+(\S+)", re.MULTILINE)
_MAX_INTERVALS = 1000


def failure_counts(text: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for m in _LINE.finditer(text):
        try:
            labels = parse_labels(m.group(1))
            value = float(m.group(2))
        except ValueError:
            continue
        key = (labels.get("model", ""), labels.get("version", ""))
        out[key] = out.get(key, 0.0) + value
    return out


class FailureJoin(Polled):
    name = "trace_failure_join"

    def __init__(
        self,
        cfg: FailureJoinConfig,
        *,
        hub: TraceHub,
        http: httpx.AsyncClient,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        super().__init__(
            interval_secs=cfg.interval_secs,
            registry=registry,
            logger=logger,
            ticker=ticker,
            ticker_name="trace-failure-join",
            job=self.poll_once,
        )
        assert cfg.metrics_url is not None
        self.cfg = cfg
        self.url = cfg.metrics_url
        self.hub = hub
        self.http = http
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.traces.failures")
        self._last: dict[tuple[str, str], float] = {}
        self._last_ns: int | None = None
        self._intervals: deque[tuple[str, str, int, int, int]] = deque()
        self._down_since: float | None = None
        self._down_reads = 0
        self._errors = Counter(
            "sidecar_trace_failure_join_errors",
            "Failed reads of Triton's failure counters.",
            ["reason"],
            registry=registry,
        )
        self._marked = Counter(
            "sidecar_trace_failure_join_marked", "Traces marked failed or possibly failed.", registry=registry
        )
        self._dropped = Counter(
            "sidecar_trace_failure_join_intervals_dropped",
            "Failure intervals dropped because too many were waiting.",
            registry=registry,
        )

    async def poll_once(self, *, apply_all: bool = False) -> int:
        """Read the counters, queue new failure intervals, apply earlier rounds'; returns traces marked."""
        now_ns = int(self.clock.now() * 1e9)
        try:
            counts = failure_counts(await fetch_exposition(self.http, self.url, what="Triton", timeout_s=10.0))
        except ScrapeError as exc:
            # One bounded reason label for every transport problem, as before.
            self._errors.labels("http").inc()
            if self._down_since is None:
                # Once per outage, not once per interval: the counter above keeps the count.
                self._down_since, self._down_reads = self.clock.now(), 0
                self.log.warning("reading %s failed: %s (logged once until it recovers)", self.url, exc)
            self._down_reads += 1
            return 0
        if self._down_since is not None:
            self.log.info(
                "reading %s recovered after %.0f s (%d failed reads)",
                self.url,
                self.clock.now() - self._down_since,
                self._down_reads,
            )
            self._down_since = None
        ready = list(self._intervals)
        self._intervals.clear()
        if self._last_ns is not None:
            for key, v in counts.items():
                delta = v - self._last.get(key, 0.0)
                if delta > 0:
                    if len(self._intervals) >= _MAX_INTERVALS:
                        self._dropped.inc()
                        continue
                    self._intervals.append((key[0], key[1], self._last_ns, now_ns, int(delta)))
        self._last, self._last_ns = counts, now_ns
        if apply_all:
            ready += list(self._intervals)
            self._intervals.clear()
        marked = 0
        for model, version, since, until, failed in ready:
            marked += self.hub.store.mark_failures(model, version, since, until, failed)
        self._marked.inc(marked)
        return marked
