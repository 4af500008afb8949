"""The token-length drift check's Prometheus series (labels bounded by ``max_series`` and closed sets)."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge

from sidecar.checks.tokens.series import Look

__all__ = ["TokenMetrics"]

_L = ["server", "model", "version", "tokens"]


class TokenMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.psi = Gauge(
            "sidecar_token_drift_psi", "PSI of the latest tested window against the reference.", _L, registry=registry
        )
        self.q = Gauge(
            "sidecar_token_drift_q",
            "Chi-square p-value of the latest tested window, BH-adjusted over the series' directions.",
            _L,
            registry=registry,
        )
        self.mean = Gauge(
            "sidecar_token_drift_mean_tokens",
            "Mean tokens per request (window: current = the latest tested window, reference).",
            [*_L, "window"],
            registry=registry,
        )
        self.drifting = Gauge(
            "sidecar_token_drift_drifting",
            "1 while the finding is active: sustained_looks of the last sustained_of windows drifted.",
            _L,
            registry=registry,
        )
        self.edges_mismatch = Gauge(
            "sidecar_token_drift_edges_mismatch",
            "1 while the test is refused: the current bucket edges are not the reference's.",
            _L,
            registry=registry,
        )
        self.level = Gauge(
            "sidecar_token_drift_level", "Per-window level from checks.drift's false-alarm budget.", registry=registry
        )
        self.looks = Counter(
            "sidecar_token_drift_looks",
            "Windows looked at (result: drifted | quiet | few_requests | no_reference | bucket_edges_changed).",
            [*_L, "result"],
            registry=registry,
        )
        self.requests = Counter(
            "sidecar_token_drift_requests",
            "Requests taken (part: reference while one is captured, window after).",
            [*_L, "part"],
            registry=registry,
        )
        self.dropped = Counter(
            "sidecar_token_drift_dropped",
            "Requests or histogram readings not taken (reason: series_limit | bad_value | no_model | malformed | "
            "key_limit).",
            ["reason"],
            registry=registry,
        )
        self.repins = Counter(
            "sidecar_token_drift_repins",
            "Pinned references captured again because the bucket edges changed (reference.repin_on_edge_change).",
            _L,
            registry=registry,
        )
        self.references_dropped = Counter(
            "sidecar_token_drift_references_dropped",
            "Pinned references not kept in or read from the store (reason: read_error | write_error | evicted, the "
            "oldest over the bound of 4 x max_series).",
            ["reason"],
            registry=registry,
        )
        self.restarts = Counter(
            "sidecar_token_drift_histogram_restarts",
            "Histogram readings counted from zero (reason: reset = a server restart; edges_changed = other bucket "
            "edges than the previous reading).",
            ["server", "reason"],
            registry=registry,
        )

    def export(self, key: tuple[str, str, str, str], look: Look, active: bool) -> None:
        self.drifting.labels(*key).set(1 if active else 0)
        self.edges_mismatch.labels(*key).set(1 if look.state == "bucket_edges_changed" else 0)
        if look.state == "tested":
            self.psi.labels(*key).set(look.psi if look.psi is not None else float("nan"))
            self.q.labels(*key).set(look.q)
            if look.mean_cur is not None:
                self.mean.labels(*key, "current").set(look.mean_cur)
        if look.mean_ref is not None:
            self.mean.labels(*key, "reference").set(look.mean_ref)

    def forget(self, key: tuple[str, str, str, str]) -> None:
        for g in (self.psi, self.q, self.drifting, self.edges_mismatch):
            with contextlib.suppress(KeyError):
                g.remove(*key)
        for w in ("current", "reference"):
            with contextlib.suppress(KeyError):
                self.mean.remove(*key, w)
