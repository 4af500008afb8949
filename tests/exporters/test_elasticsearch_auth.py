"""Elasticsearch auth and TLS through the real client against the stand-in: an API key from the environment, and
HTTPS with a self-signed certificate trusted only through ``tls.ca_file``."""

from __future__ import annotations

from pathlib import Path

import pytest
from es_standin import EsStandIn
from prometheus_client import CollectorRegistry
from test_exporter_auth import _self_signed

from exporters.audit_outbox import DeadLetters, EsDoc
from exporters.config import ElasticsearchConfig
from exporters.elasticsearch import ElasticsearchBulk, client_from_config
from exporters.sender import DeliveryError
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.store import Store

DOC = EsDoc(1, "a", "sidecar-audit-2023.11.14", b'{"k": 1}')


def _bulk(cfg: ElasticsearchConfig) -> ElasticsearchBulk:
    reg = CollectorRegistry()
    return ElasticsearchBulk(
        cfg,
        client=client_from_config(cfg),
        registry=reg,
        clock=FakeClock(),
        dead_letters=DeadLetters(Store(":memory:"), max_rows=10, registry=reg),
    )


async def test_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELASTIC_API_KEY", "a2V5OnNlY3JldA==")
    with EsStandIn() as es:
        cfg = parse_config(
            {"alerting": {"audit": {"elasticsearch": {"url": es.url, "api_key": "${env:ELASTIC_API_KEY}"}}}}
        ).alerting.audit.elasticsearch
        assert cfg is not None
        bulk = _bulk(cfg)
        assert await bulk.send([DOC]) == []
        await bulk.aclose()
    assert set(es.auth) == {"ApiKey a2V5OnNlY3JldA=="}


async def test_tls_ca_file_lets_a_self_signed_cluster_in_and_without_it_the_bulk_is_retried(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "es")
    with EsStandIn(tls=(cert, key)) as es:
        plain = _bulk(ElasticsearchConfig(url=es.url))
        with pytest.raises(DeliveryError) as exc:  # the system CAs do not know this server: retryable, not lost
            await plain.send([DOC])
        assert exc.value.reason == "connect"
        await plain.aclose()
        assert es.docs == {}
        trusting = _bulk(ElasticsearchConfig.model_validate({"url": es.url, "tls": {"ca_file": str(cert)}}))
        assert await trusting.send([DOC]) == []
        await trusting.aclose()
    assert list(es.docs) == [("sidecar-audit-2023.11.14", "a")]
