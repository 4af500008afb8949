"""The self-telemetry of the server sources: one set of families per registry, labelled by server."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["REFUSAL_REASONS", "SCRAPE_FAILURES", "ServerTelemetry"]

SCRAPE_FAILURES = ("timeout", "connect", "http_status", "content_type", "parse", "too_large", "too_many_series")
REFUSAL_REASONS = ("wrong_type", "unit", "non_finite", "negative", "labels")
FAMILY_CHANGES = ("gone", "renamed", "appeared")


class ServerTelemetry:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge(
            "sidecar_server_up", "1 when the last scrape of the server succeeded.", ["server"], registry=registry
        )
        self.scrapes = Counter("sidecar_server_scrapes", "Scrapes by result.", ["server", "result"], registry=registry)
        self.failures = Counter(
            "sidecar_server_scrape_failures", "Failed scrapes by reason.", ["server", "reason"], registry=registry
        )
        self.refused = Counter(
            "sidecar_server_families_refused",
            "Families a scrape held that the profile refused (wrong type, unit, NaN/Inf, negative, labels).",
            ["server", "reason"],
            registry=registry,
        )
        self.models_refused = Counter(
            "sidecar_server_models_refused",
            "Model/version pairs dropped above max_models, per scrape.",
            ["server"],
            registry=registry,
        )
        self.unmatched = Counter(
            "sidecar_server_unmatched_scrapes",
            "Good scrapes no profile (or not the configured one) matched.",
            ["server"],
            registry=registry,
        )
        self.resets = Counter(
            "sidecar_server_series_resets",
            "Cumulative series seen to go back (a server restart).",
            ["server"],
            registry=registry,
        )
        self.family_changes = Counter(
            "sidecar_server_family_changes",
            "Families of the profile that disappeared, were replaced by their new name, or appeared.",
            ["server", "change"],
            registry=registry,
        )
        self.profile = Gauge(
            "sidecar_server_profile_info",
            "1 for the profile each server is read with.",
            ["server", "profile"],
            registry=registry,
        )
        self.duration = Gauge(
            "sidecar_server_scrape_duration_seconds",
            "Duration of the last scrape (fetch, parse and map).",
            ["server"],
            registry=registry,
        )

    def prime(self, server: str) -> None:
        """Every bounded label value exists from the start, so rate() sees the first failure."""
        for reason in SCRAPE_FAILURES:
            self.failures.labels(server, reason)
        for reason in REFUSAL_REASONS:
            self.refused.labels(server, reason)
        for change in FAMILY_CHANGES:
            self.family_changes.labels(server, change)
        for result in ("success", "failure"):
            self.scrapes.labels(server, result)
        self.models_refused.labels(server)
        self.unmatched.labels(server)
        self.resets.labels(server)
