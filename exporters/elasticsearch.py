"""Ships audit events to Elasticsearch through the official client (``AsyncElasticsearch``, bulk API).

Every document is written with ``create``, a deterministic ``_id`` (the audit event's id) and the daily index
of the event's own time (``exporters.es_template.index_for``), so a replay after a timeout, a dropped
connection or a crash never duplicates: Elasticsearch answers 409 for a document it already has, counted as
already stored. Every item's status is read, since a 200 bulk answer can carry failures: items answered 429 or
5xx are retried alone (the rest of the batch settles); items refused with another 4xx (a mapping conflict,
say) go to the dead-letter table with the status and reason, counted as dropped{permanent}. A whole-request
429, 5xx, timeout or connection failure is retried by ``exporters.sender.Sender`` with back-off (Retry-After
honoured). The client's own retries are off, so there is one retry loop, counted in one place.

The index template (explicit mappings) and the ILM policy are installed before the first bulk of each run;
while that fails the bulk is not sent, and the install is retried like a bulk.

The client is injected (``ElasticsearchBulk(client=...)``; wiring passes a ``ClientFactory``, by default
``client_from_config``), as every HTTP client of the sidecar is. What is injected is the official
``AsyncElasticsearch``, not the sidecar's shared ``httpx.AsyncClient``: elastic_transport owns the connection
pool of each node, the choice and failover among several nodes (a dead node is passed over, sniffing when
enabled) and the per-node retries; handing it our httpx client would bypass all of that. It still speaks httpx:
its node class is elastic_transport's ``HttpxAsyncHttpNode`` (one HTTP library in the process), each node with
a client of its own built from this config (timeouts, TLS, auth).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
from elastic_transport import ConnectionError as EsConnectionError
from elastic_transport import ConnectionTimeout, HttpxAsyncHttpNode, SerializationError, TransportError
from elasticsearch import ApiError, AsyncElasticsearch
from prometheus_client import CollectorRegistry, Counter

from exporters.audit_outbox import DeadLetters, EsDoc
from exporters.config import ElasticsearchConfig
from exporters.es_template import lifecycle_policy, template_body
from exporters.sender import DeliveryError, Partial, RefusedError, retry_after_secs
from sidecar.clock import Clock

__all__ = ["ClientFactory", "ElasticsearchBulk", "client_from_config"]

ClientFactory = Callable[[ElasticsearchConfig], AsyncElasticsearch]


def client_from_config(cfg: ElasticsearchConfig) -> AsyncElasticsearch:
    """The client for ``cfg``: every node listed, API key or basic auth, a CA file; no retries of its own."""
    kw: dict[str, Any] = {}
    if cfg.api_key is not None:
        kw["api_key"] = cfg.api_key.get_secret_value()
    elif cfg.basic_auth is not None:
        kw["basic_auth"] = (cfg.basic_auth.username, cfg.basic_auth.password.get_secret_value())
    elif cfg.bearer_token is not None:
        kw["bearer_auth"] = cfg.bearer_token.get_secret_value()
    if cfg.tls is not None:
        if cfg.tls.ca_file is not None:
            kw["ca_certs"] = str(cfg.tls.ca_file)
        if cfg.tls.cert_file is not None:
            kw["client_cert"] = str(cfg.tls.cert_file)
        if cfg.tls.key_file is not None:
            kw["client_key"] = str(cfg.tls.key_file)
    return AsyncElasticsearch(
        [cfg.url, *cfg.urls],
        node_class=HttpxAsyncHttpNode,  # httpx, the HTTP library of the rest of the sidecar
        request_timeout=cfg.timeout_secs,
        max_retries=0,
        retry_on_status=(),
        retry_on_timeout=False,
        **kw,
    )


def _api_error(exc: ApiError, now: float, what: str) -> Exception:
    status = int(exc.meta.status)
    if status == 429 or status >= 500:
        hint = retry_after_secs(exc.meta.headers.get("retry-after"), now) if exc.meta.headers else None
        return DeliveryError("http_5xx" if status >= 500 else "http_429", f"{what} answered {status}", hint)
    return RefusedError("http_4xx", f"{what} answered {status}: {str(exc.body)[:300]}")


class ElasticsearchBulk:
    def __init__(
        self,
        cfg: ElasticsearchConfig,
        *,
        client: AsyncElasticsearch,
        dead_letters: DeadLetters,
        registry: CollectorRegistry,
        clock: Clock,
        logger: logging.Logger | None = None,
    ) -> None:
        self.cfg = cfg
        self.client = client
        self.dead = dead_letters
        self.clock = clock
        self.log = logger or logging.getLogger("sidecar.elasticsearch")
        self._installed = False
        self._items = Counter(
            "sidecar_elasticsearch_bulk_items",
            "Bulk items by outcome (created, duplicate, retried, rejected).",
            ["outcome"],
            registry=registry,
        )
        self._installs = Counter(
            "sidecar_elasticsearch_setup_failures",
            "Failed tries to install the index template and ILM policy (retried before the next bulk).",
            registry=registry,
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def _call(self, what: str, coro: Any) -> Any:
        try:
            return await coro
        except ApiError as exc:
            raise _api_error(exc, self.clock.now(), what) from None
        except ConnectionTimeout as exc:
            raise DeliveryError("timeout", f"{what}: {exc.message}") from None
        except EsConnectionError as exc:
            raise DeliveryError("connect", f"{what}: {exc.message}") from None
        except SerializationError:
            raise DeliveryError("bad_answer", f"{what}: the answer is not the expected JSON") from None
        except TransportError as exc:
            raise DeliveryError("error", f"{what}: {exc.message}") from None

    async def install(self) -> None:
        """Install the ILM policy and the index template (idempotent: PUT replaces them)."""
        c = self.cfg
        try:
            await self._call(
                "Elasticsearch ILM",
                self.client.ilm.put_lifecycle(name=c.ilm_policy, policy=lifecycle_policy(c.retention_days)),
            )
            body = template_body(c.index, c.ilm_policy, c.shards, c.replicas)
            await self._call(
                "Elasticsearch index template",
                self.client.indices.put_index_template(
                    name=c.index,
                    index_patterns=body["index_patterns"],
                    priority=body["priority"],
                    template=body["template"],
                    meta=body["_meta"],
                ),
            )
        except Exception:
            self._installs.inc()
            raise
        self._installed = True

    async def send(self, docs: list[EsDoc]) -> list[EsDoc] | Partial[EsDoc]:
        """One bulk request; returns the documents to retry (with the count refused for good, if any).
        Raises for whole-request failures."""
        if not self._installed:
            await self.install()
        ops: list[bytes] = []
        for d in docs:
            ops.append(orjson.dumps({"create": {"_index": d.index, "_id": d.id}}))
            ops.append(d.body)
        resp = await self._call("Elasticsearch bulk", self.client.bulk(operations=ops))  # type: ignore[arg-type]  # pre-encoded lines are sent as they are
        try:
            items = resp.body["items"]
            errors = bool(resp.body.get("errors"))
        except (KeyError, TypeError, AttributeError):
            raise DeliveryError("bad_answer", "bulk answer has no items") from None
        if not errors and len(items) == len(docs):
            self._items.labels("created").inc(len(docs))
            return []
        retry: list[EsDoc] = []
        refused = 0
        now = self.clock.now()
        for doc, item in zip(docs, items, strict=False):
            res = (item.get("create") or item.get("index") or {}) if isinstance(item, dict) else {}
            status = int(res.get("status", 0))
            if 200 <= status < 300:
                self._items.labels("created").inc()
            elif status == 409:
                self._items.labels("duplicate").inc()
            elif status == 429 or status >= 500 or status == 0:
                self._items.labels("retried").inc()
                retry.append(doc)
            else:
                err = res.get("error") or {}
                reason = f"{err.get('type', '?')}: {err.get('reason', '')}"
                self._items.labels("rejected").inc()
                refused += 1
                self.dead.add(doc, now, status, reason)
                self.log.error("Elasticsearch refused audit event %s (%d): %s", doc.id, status, reason[:300])
        # Items the answer does not cover (a truncated answer) are retried; create makes that safe.
        retry.extend(docs[len(items) :])
        return Partial(retry, refused) if refused else retry
