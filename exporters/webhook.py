"""Webhooks: a finding that becomes active calls a configured URL (e.g. to start a retraining pipeline).

The body is JSON; it is signed with HMAC-SHA256 over ``TIMESTAMP.BODY`` (the GitHub / Stripe scheme) so a
receiver can check it came from this sidecar and refuse replays older than it tolerates. Delivery goes
through ``exporters.sender`` (the one retry loop: 5xx, 408, 429 and transport errors retried with backoff)
and is counted in ``sidecar_export_*{exporter="webhook_<name>"}``; calls over the per-webhook rate limit are
not sent and are counted in ``sidecar_webhook_rate_limited_total``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter

from exporters.config import WebhookConfig
from exporters.sender import MemoryQueue, RetryPolicy, Sender, check_response
from exporters.telemetry import ExportTelemetry
from sidecar.clock import Clock
from sidecar.component import Role
from sidecar.model import Finding
from sidecar.naming import fingerprint
from sidecar.redact import mask_url

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "WebhookExporter", "sign"]

SIGNATURE_HEADER = "X-Sidecar-Signature"
TIMESTAMP_HEADER = "X-Sidecar-Timestamp"
# Fingerprints of active findings remembered per webhook, so one still-active finding calls once.
_MAX_ACTIVE = 10_000


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def _matches(f: Finding, match: dict[str, str]) -> bool:
    have = dict(f.labels, check=f.check, kind=f.kind)
    return all(have.get(k) == v for k, v in match.items())


class _Limited:
    """The rate-limit counter, shared by every webhook of one registry."""

    _ATTR = "_sidecar_webhook_limited"

    @classmethod
    def of(cls, registry: CollectorRegistry) -> Counter:
        c = getattr(registry, cls._ATTR, None)
        if not isinstance(c, Counter):
            c = Counter(
                "sidecar_webhook_rate_limited",
                "Webhook calls not made because the webhook's min_interval_secs had not passed.",
                ["webhook"],
                registry=registry,
            )
            setattr(registry, cls._ATTR, c)
        return c


class WebhookExporter:
    role = Role.SINK

    def __init__(
        self,
        config: WebhookConfig,
        *,
        registry: CollectorRegistry,
        clock: Clock,
        http: httpx.AsyncClient,
        logger: logging.Logger | None = None,
        sleep: Any = None,
    ) -> None:
        self.config = config
        self.name = f"webhook_{config.name}"
        self.clock = clock
        self.http = http
        self.log = logger or logging.getLogger(f"sidecar.webhook.{config.name}")
        self._secret = config.secret.get_secret_value().encode()
        self._active: set[str] = set()
        self._last_call: float | None = None
        self._limited = _Limited.of(registry).labels(config.name)
        kw: dict[str, Any] = {"sleep": sleep} if sleep is not None else {}
        self.sender: Sender[bytes] = Sender(
            f"webhook {config.name} {mask_url(config.url)}",
            self._post,
            policy=RetryPolicy(**config.retry.model_dump()),
            queue=MemoryQueue(config.max_queue),
            max_batch=1,
            stats=ExportTelemetry.of(registry).exporter(self.name),
            clock=clock,
            logger=self.log,
            **kw,
        )

    def on_findings(self, findings: Sequence[Finding], now: float) -> None:
        # Only findings that called stay remembered: one held back by the rate limit calls when it allows.
        called: set[str] = set()
        for f in findings:
            if not f.active or f.insufficient_data or not _matches(f, self.config.match):
                continue
            fp = fingerprint(dict(f.labels, check=f.check))
            if fp in self._active:
                called.add(fp)
                continue
            mono = self.clock.monotonic()
            if self._last_call is not None and mono - self._last_call < self.config.min_interval_secs:
                self._limited.inc()
                continue
            self._last_call = mono
            self.sender.submit(self._body(f, now))
            called.add(fp)
        self._active = called if len(called) <= _MAX_ACTIVE else set()

    @staticmethod
    def _body(f: Finding, now: float) -> bytes:
        return orjson.dumps(
            {
                "check": f.check,
                "kind": f.kind,
                "labels": dict(f.labels),
                "severity": f.severity,
                "summary": f.summary,
                "description": f.description,
                "value": f.value,
                "threshold": f.threshold,
                "facts": dict(f.facts),
                "evaluated_at": f.evaluated_at or now,
            }
        )

    async def _post(self, batch: list[bytes]) -> list[bytes]:
        for body in batch:
            ts = str(int(self.clock.now()))
            headers = {
                "Content-Type": "application/json",
                TIMESTAMP_HEADER: ts,
                SIGNATURE_HEADER: sign(self._secret, ts, body),
            }
            resp = await self.http.post(
                self.config.url, content=body, headers=headers, timeout=self.config.timeout_secs
            )
            check_response(resp, self.clock.now(), f"webhook {self.config.name}")
        return []

    async def start(self) -> None:
        await self.sender.start()

    async def shutdown(self) -> None:
        await self.sender.shutdown()

    def readiness(self) -> None:
        return None

    def routes(self) -> None:
        return None
