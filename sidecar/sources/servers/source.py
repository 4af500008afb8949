"""Scrapes one model server on an interval and reads it through its profile (``servers:`` in the config).

One ``ServerSource`` per configured server: fetch (``scrape.fetch_exposition``, bounded), parse
(``promtext``), detect the profile (or use the configured one), map onto the schema, derive interval SLIs,
and export them through the shared ``ServingExport`` collector. A failed scrape withdraws the interval SLIs;
an exposition no profile matches says so in /readyz; refused families and dropped models are counted; family
changes after a restart are findings (``guard.py``). Nothing here raises out of the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import httpx
from prometheus_client import CollectorRegistry

from sidecar.clock import Clock
from sidecar.component import Readiness
from sidecar.errors import ParseError, ScrapeError
from sidecar.model import Finding
from sidecar.polled import Polled, TickerFactory
from sidecar.promtext import Exposition, parse_exposition
from sidecar.scrape import fetch_exposition
from sidecar.sources.servers.config import ServingTargetConfig
from sidecar.sources.servers.derive import ServingDeriver
from sidecar.sources.servers.export import ServingExport
from sidecar.sources.servers.guard import FamilyGuard
from sidecar.sources.servers.mapping import Limits, map_exposition, parse_units
from sidecar.sources.servers.profile import Profile
from sidecar.sources.servers.registry import PROFILES, detect, family_names
from sidecar.sources.servers.schema import ServingSnapshot
from sidecar.sources.servers.telemetry import ServerTelemetry

__all__ = ["ServerSource"]

_LABEL_CACHE_MAX = 50_000


def _matches_nothing(snap: ServingSnapshot, types: Mapping[str, str]) -> bool:
    """No family of the profile present (a refused one is present: the profile is right, the data bad), nor
    declared without samples: a real MLServer before its first request writes ``# TYPE`` lines of its
    labelled families and no series yet, and it is read with 0 models, not "matches no profile"."""
    if snap.families or snap.refused:
        return False
    return not (PROFILES[snap.profile].families & family_names(types, {}))


class ServerSource(Polled):
    name = "server"

    def __init__(
        self,
        config: ServingTargetConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        http: httpx.AsyncClient,
        export: ServingExport,
        telemetry: ServerTelemetry,
        logger: logging.Logger | None = None,
        ticker: TickerFactory | None = None,
    ) -> None:
        self.name = f"server:{config.name}"
        super().__init__(
            interval_secs=config.interval_secs,
            registry=registry,
            logger=logger or logging.getLogger(f"sidecar.server.{config.name}"),
            ticker=ticker,
            ticker_name=f"server-scrape-{config.name}",
            job=self.scrape_once,
        )
        self.config = config
        self.clock = clock
        self.http = http
        self.t = telemetry
        self.limits = Limits(max_models=config.max_models)
        self.deriver = ServingDeriver(max_models=config.max_models)
        self.guard = FamilyGuard(config.name, check=self.name)
        self.profile: Profile | None = PROFILES[config.profile] if config.profile != "auto" else None
        self._detected: Profile | None = None
        self.last: ServingSnapshot | None = None
        self._label_cache: dict[str, dict[str, str]] = {}
        self._last_error = "no scrape yet"
        self._unmatched = ""
        self._last_ok_mono: float | None = None
        telemetry.prime(config.name)
        export.add(config.name, self.deriver, self.expire_stale)

    async def scrape_once(self) -> bool:
        """One scrape; True when it was read through a profile. Never raises."""
        server = self.config.name
        t0 = self.clock.monotonic()
        try:
            text = await fetch_exposition(
                self.http,
                self.config.url,
                what=f"server {server}",
                timeout_s=self.config.timeout_secs,
                max_bytes=int(self.config.max_body_mib * 1024 * 1024),
            )
            if len(self._label_cache) > _LABEL_CACHE_MAX:
                self._label_cache.clear()
            expo = parse_exposition(text, self._label_cache, eager_labels=False)  # parsed as mapped
        except ScrapeError as exc:
            return self._failed(exc.reason, str(exc))
        except ParseError as exc:
            return self._failed("parse", f"malformed exposition: {exc}")
        if len(expo.samples) > self.config.max_series:
            return self._failed("too_many_series", f"{len(expo.samples)} samples, over max_series")
        self.t.up.labels(server).set(1)
        self.t.scrapes.labels(server, "success").inc()
        units = parse_units(text)
        # A pinned profile, or the one detected before: detection runs again only when it maps nothing.
        profile = self.profile or self._detected
        snap = self._map(expo, profile, units) if profile is not None else None
        if self.config.profile == "auto" and (snap is None or _matches_nothing(snap, expo.types)):
            found = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
            if found is not None and found is not profile:
                profile, snap = found, self._map(expo, found, units)
            self._detected = found
        if profile is None or snap is None or _matches_nothing(snap, expo.types):
            return self._no_match(len(expo.types) or len(expo.samples))
        self._read(snap, profile)
        self.t.duration.labels(server).set(self.clock.monotonic() - t0)
        return True

    def _map(self, expo: Exposition, profile: Profile, units: dict[str, str]) -> ServingSnapshot:
        return map_exposition(
            expo, profile, server=self.config.name, taken_at=self.clock.monotonic(), limits=self.limits, units=units
        )

    def _read(self, snap: ServingSnapshot, profile: Profile) -> None:
        server = self.config.name
        for r in snap.refused:
            self.t.refused.labels(server, r.reason).inc()
        if snap.models_refused:
            self.t.models_refused.labels(server).inc(snap.models_refused)
        if self.last is None or self.last.profile != profile.name:
            if self.last is not None:
                self.t.profile.remove(server, self.last.profile)
            self.t.profile.labels(server, profile.name).set(1)
            self.log.info("server %s at %s: read with the %s profile", server, self.config.url, profile.name)
        for change in self.guard.observe(profile, snap.families, self.clock.now()):
            self.t.family_changes.labels(server, change.change).inc()
            self.log.warning("%s", change.problem)
        if self.last is not None:
            appeared = len(snap.families - self.last.families)
            if appeared:
                self.t.family_changes.labels(server, "appeared").inc(appeared)
        before = self.deriver.resets
        self.deriver.update(snap)
        if self.deriver.resets > before:
            self.t.resets.labels(server).inc(self.deriver.resets - before)
        self.last = snap
        self._last_ok_mono = snap.taken_at
        if self._last_error or self._unmatched:
            self.log.info("server %s: up, %d models", server, len(snap.models))
        self._last_error = self._unmatched = ""

    def _no_match(self, families: int) -> bool:
        server = self.config.name
        self.t.unmatched.labels(server).inc()
        self.deriver.mark_stale()
        if self.config.profile == "auto":
            msg = f"the exposition ({families} families) matches no profile"
        else:
            msg = f"profile {self.config.profile} matches none of the exposition's {families} families"
        if msg != self._unmatched:
            self.log.warning("server %s at %s: %s", server, self.config.url, msg)
        self._unmatched, self._last_error = msg, ""
        return False

    def _failed(self, reason: str, message: str) -> bool:
        server = self.config.name
        self.t.up.labels(server).set(0)
        self.t.scrapes.labels(server, "failure").inc()
        self.t.failures.labels(server, reason).inc()
        self.deriver.mark_stale()
        if message != self._last_error:
            self.log.warning("scrape of server %s at %s failed (%s): %s", server, self.config.url, reason, message)
        self._last_error = message
        return False

    def expire_stale(self) -> None:
        """Withdraw interval SLIs when no good scrape arrived for ``stale_after_secs``."""
        if (
            self.deriver.fresh
            and self._last_ok_mono is not None
            and self.clock.monotonic() - self._last_ok_mono > self.config.stale_after_secs
        ):
            self.deriver.mark_stale()

    def evaluate(self, now: float) -> Sequence[Finding]:
        """The upgrade guard's findings (a family gone, or replaced by its new name)."""
        return self.guard.findings(now)

    def readiness(self) -> Readiness:
        where = f"server {self.config.name} at {self.config.url}"
        if self._last_error:
            return Readiness(False, f"{where}: {self._last_error}")
        if self._unmatched:
            return Readiness(False, f"{where}: {self._unmatched}")
        last = self.last
        return Readiness(True, f"{where}: {last.profile} profile, {len(last.models)} models" if last else where)
