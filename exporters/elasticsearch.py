"""Ships audit events to Elasticsearch with the bulk API.

Each document is written with ``create`` and a deterministic ``_id`` (the audit event's id), so a replay after
a timeout or a partial failure never duplicates: Elasticsearch answers 409 for a document it already has,
which counts as delivered. Per-item results are read: items answered 429 (or 5xx) are retried alone; items
refused with another 4xx (a mapping error, say) are logged with their reason, counted and dropped. A 429 for
the whole request backs off, honouring Retry-After (through ``exporters.sender.Sender``), as do transport
errors, 408 and 5xx.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter

from exporters.config import ElasticsearchConfig
from exporters.httpauth import client_for, request_auth
from exporters.sender import DeliveryError, Partial, check_response
from sidecar.clock import Clock

__all__ = ["AuditDoc", "ElasticsearchBulk"]


@dataclass(frozen=True)
class AuditDoc:
    id: str
    body: Mapping[str, Any]


class ElasticsearchBulk:
    def __init__(
        self,
        cfg: ElasticsearchConfig,
        *,
        http: httpx.AsyncClient,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.http = client_for(cfg, http)
        self.owns_http = self.http is not http
        self._auth = request_auth(cfg)
        self.clock = clock
        self.url = cfg.url.rstrip("/") + "/_bulk"
        self.log = logger or logging.getLogger("sidecar.elasticsearch")
        self._items = Counter(
            "sidecar_elasticsearch_bulk_items",
            "Bulk items by outcome (created, duplicate, retried, rejected).",
            ["outcome"],
            registry=registry,
        )

    async def aclose(self) -> None:
        if self.owns_http:
            await self.http.aclose()

    def body(self, docs: Sequence[AuditDoc]) -> bytes:
        lines = []
        for d in docs:
            lines.append(orjson.dumps({"create": {"_index": self.cfg.index, "_id": d.id}}))
            lines.append(orjson.dumps(d.body))
        return b"\n".join(lines) + b"\n"

    async def send(self, docs: list[AuditDoc]) -> list[AuditDoc] | Partial[AuditDoc]:
        """One bulk request; returns the documents to retry (with the count refused for good, if any).
        Raises for whole-request failures."""
        headers = {"Content-Type": "application/x-ndjson"}
        if self.cfg.api_key is not None:
            headers["Authorization"] = f"ApiKey {self.cfg.api_key.get_secret_value()}"
        # Transport errors propagate: the sender counts them (connect, timeout) and retries.
        resp = await self.http.post(
            self.url, content=self.body(docs), headers=headers, timeout=self.cfg.timeout_secs, auth=self._auth
        )
        check_response(resp, self.clock.now(), "Elasticsearch bulk")
        try:
            result = orjson.loads(resp.content)
            items = result["items"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise DeliveryError("bad_answer", "bulk answer is not the expected JSON") from None
        if not result.get("errors"):
            self._items.labels("created").inc(len(docs))
            return []
        retry: list[AuditDoc] = []
        refused = 0
        for doc, item in zip(docs, items, strict=False):
            res = item.get("create") or item.get("index") or {}
            status = int(res.get("status", 0))
            if status < 300:
                self._items.labels("created").inc()
            elif status == 409:
                self._items.labels("duplicate").inc()
            elif status == 429 or status >= 500:
                self._items.labels("retried").inc()
                retry.append(doc)
            else:
                err = res.get("error") or {}
                self._items.labels("rejected").inc()
                refused += 1
                self.log.error(
                    "Elasticsearch refused audit event %s (%d): %s: %s",
                    doc.id,
                    status,
                    err.get("type", "?"),
                    str(err.get("reason", ""))[:300],
                )
        # Items the answer does not cover (a truncated answer) are retried; create makes that safe.
        retry.extend(docs[len(items) :])
        return Partial(retry, refused) if refused else retry
