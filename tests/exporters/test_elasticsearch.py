"""Elasticsearch delivery through the real ``elasticsearch`` client against the local stand-in
(tests/exporters/es_standin.py): per-item results, dead letters, template and ILM, outages, replay order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from es_standin import EsStandIn
from prometheus_client import CollectorRegistry

from exporters.audit import AuditLog
from exporters.audit_outbox import AuditOutbox, DeadLetters, EsDoc
from exporters.config import ElasticsearchConfig
from exporters.elasticsearch import ElasticsearchBulk, client_from_config
from exporters.es_template import index_for
from exporters.sender import RetryPolicy, Sender
from exporters.telemetry import ExportTelemetry
from sidecar.clock import FakeClock
from sidecar.store import Store

T0 = 1_700_000_000.0
ES = {"exporter": "elasticsearch"}


class Stack:
    def __init__(
        self,
        tmp_path: Path,
        url: str,
        *,
        store: Store | None = None,
        max_queue: int = 100_000,
        overflow: str = "drop_oldest",
        timeout: float = 5.0,
        **audit: Any,
    ) -> None:
        self.clock = FakeClock(T0)
        self.reg = CollectorRegistry()
        self.slept: list[float] = []
        self.store = store or Store(tmp_path / "s.sqlite")
        self.cfg = ElasticsearchConfig(
            url=url, max_queue=max_queue, overflow=overflow, max_batch=50, timeout_secs=timeout
        )
        self.outbox = AuditOutbox(self.store, max_rows=max_queue, overflow=self.cfg.overflow)
        self.dead = DeadLetters(self.store, max_rows=100, registry=self.reg)
        self.bulk = ElasticsearchBulk(
            self.cfg, client=client_from_config(self.cfg), dead_letters=self.dead, registry=self.reg, clock=self.clock
        )

        async def sleep(s: float) -> None:
            self.slept.append(s)
            self.clock.advance(s)

        self.sender: Sender[EsDoc] = Sender(
            "elasticsearch",
            self.bulk.send,
            policy=RetryPolicy(max_backoff_secs=4.0),
            queue=self.outbox,
            max_batch=50,
            stats=ExportTelemetry.of(self.reg).exporter("elasticsearch"),
            clock=self.clock,
            sleep=sleep,
            close=self.bulk.aclose,
        )
        self.audit = AuditLog(
            max_rows=audit.pop("max_rows", 100_000),
            registry=self.reg,
            store=self.store,
            es=self.sender,
            outbox=self.outbox,
            dead_letters=self.dead,
            clock=self.clock,
            **audit,
        )

    def value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.reg.get_sample_value(name, labels or {})


async def test_bulk_per_item_results_dead_letters_and_retry_after(tmp_path: Path) -> None:
    with EsStandIn() as es:
        s = Stack(tmp_path, es.url)
        es.docs[(index_for("sidecar-audit", T0), "ev-1")] = {"kind": "already"}
        es.item_faults = {"ev-2": 429, "ev-3": 400}
        es.answers.append(("status", 429, {"Retry-After": "3"}))
        for i in range(4):
            assert s.audit.record("alert_fired", f"ev-{i}", T0, {"n": i})
        await s.sender.flush()
        await s.sender.shutdown()
    assert s.slept[0] == 3.0  # the whole-request 429's Retry-After
    assert s.value("sidecar_export_failed_total", {**ES, "reason": "http_429"}) == 1

    def items(outcome: str) -> float | None:
        return s.value("sidecar_elasticsearch_bulk_items_total", {"outcome": outcome})

    assert (items("created"), items("duplicate"), items("retried"), items("rejected")) == (2, 1, 1, 1)
    # Only the item answered 429 went again, with its deterministic id: ev-0 then ev-2 were created once each.
    assert es.creates == ["ev-0", "ev-2"]
    assert s.value("sidecar_export_sent_total", ES) == 3
    assert s.value("sidecar_export_dropped_total", {**ES, "reason": "permanent"}) == 1
    assert s.value("sidecar_export_received_total", ES) == 4
    dead = s.dead.rows()
    assert [(d["id"], d["status"]) for d in dead] == [("ev-3", 400)]
    assert dead[0]["reason"].startswith("mapper_parsing_exception") and dead[0]["doc"]["n"] == 3
    assert s.value("sidecar_elasticsearch_dead_letters_total") == 1
    assert len(s.outbox) == 0


async def test_template_with_explicit_mappings_and_ilm_policy_installed_before_the_first_bulk(tmp_path: Path) -> None:
    with EsStandIn() as es:
        s = Stack(tmp_path, es.url)
        es.answers.append(503)  # the first install fails: nothing is sent until it is in place
        s.audit.record("change", "c-1", T0, {"what": "deploy ctr v2", "model": "ctr"})
        await s.sender.flush()
        await s.sender.shutdown()
    assert s.value("sidecar_elasticsearch_setup_failures_total") == 1
    policy = es.policies["sidecar-audit"]["policy"]
    assert policy["phases"]["delete"] == {"min_age": "90d", "actions": {"delete": {}}}
    t = es.templates["sidecar-audit"]
    assert t["index_patterns"] == ["sidecar-audit-*"]
    assert t["template"]["settings"]["index.lifecycle.name"] == "sidecar-audit"
    props = t["template"]["mappings"]["properties"]
    assert t["template"]["mappings"]["dynamic"] is False
    assert props["model"]["type"] == props["trace_id"]["type"] == props["kind"]["type"] == "keyword"
    assert props["what"]["type"] == props["reason"]["type"] == "text"
    assert props["at"] == {"type": "date", "format": "epoch_second"}
    assert es.docs[("sidecar-audit-2023.11.14", "c-1")]["what"] == "deploy ctr v2"


async def test_outage_during_a_steady_stream_every_event_present_exactly_once_in_order(tmp_path: Path) -> None:
    """Faults of every kind during a stream of 600 events: down (connection refused mid-stream), 503, a
    whole-request 429, a connection dropped after the documents were stored (the replay gets 409s), slow
    answers past the client's timeout, per-item 429 and 503."""
    with EsStandIn() as es:
        s = Stack(tmp_path, es.url, timeout=0.3)
        sent: list[str] = []
        for i in range(600):
            eid = f"req-{i:04d}"
            assert s.audit.record("request", eid, T0 + i, {"model": "ctr", "version": "1"})
            sent.append(eid)
            if i == 100:
                es.down = True  # outage: events keep being recorded and wait in SQLite
            if i == 300:
                assert len(s.outbox) >= 200  # waiting on disk, not in memory
                es.down = False
                es.answers.extend([503, ("status", 429, {"Retry-After": "2"}), "drop_mid", ("slow", 0.6)])
                es.item_faults = {"req-0350": 429, "req-0351": 503}
            if i % 20 == 19:
                await s.sender.drain_now()
        await s.sender.flush()
        await s.sender.shutdown()
    assert sorted(es.creates) == sent  # every event, each created once
    # Replayed in recording order except the per-item retries, which go right after their batch.
    without_retried = [x for x in es.creates if x not in ("req-0350", "req-0351")]
    assert without_retried == [x for x in sent if x not in ("req-0350", "req-0351")]
    assert s.value("sidecar_elasticsearch_bulk_items_total", {"outcome": "duplicate"}) >= 1  # after drop_mid
    for reason in ("connect", "http_5xx", "http_429", "timeout"):
        assert (s.value("sidecar_export_failed_total", {**ES, "reason": reason}) or 0) >= 1, reason
    assert s.value("sidecar_export_sent_total", ES) == 600
    assert s.value("sidecar_export_dropped_total", {**ES, "reason": "gave_up"}) is None
    assert len(s.outbox) == 0


@pytest.mark.parametrize(
    "overflow,kept", [("drop_oldest", ["e-2", "e-3", "e-4"]), ("refuse_new", ["e-0", "e-1", "e-2"])]
)
async def test_a_full_replay_queue_applies_its_overflow_policy_counted(
    tmp_path: Path, overflow: str, kept: list[str]
) -> None:
    with EsStandIn() as es:
        s = Stack(tmp_path, es.url, max_queue=3, overflow=overflow)
        es.down = True
        for i in range(5):
            assert s.audit.record("alert_fired", f"e-{i}", T0 + i, {})  # the SQLite audit row is always kept
        assert [d.id for d in s.outbox.head(10)] == kept
        assert s.value("sidecar_export_dropped_total", {**ES, "reason": "queue_full"}) == 2
        es.down = False
        await s.sender.flush()
        await s.sender.shutdown()
    assert es.creates == kept
    assert len(s.audit.events(limit=10)) == 5


async def test_the_replay_queue_survives_a_restart_and_delivers_in_order(tmp_path: Path) -> None:
    with EsStandIn() as es:
        es.down = True
        first = Stack(tmp_path, es.url)
        for i in range(30):
            first.audit.record("change", f"c-{i:02d}", T0 + i, {"what": f"deploy {i}"})
        await first.sender.drain_now()
        await first.sender.shutdown()
        first.store.close()
        es.down = False
        again = Stack(tmp_path, es.url)
        assert len(again.outbox) == 30
        await again.sender.flush()
        await again.sender.shutdown()
    assert es.creates == [f"c-{i:02d}" for i in range(30)]


def test_config_several_nodes_and_auth() -> None:
    cfg = ElasticsearchConfig(url="https://u:p%40ss@es-0:9200/", urls=["https://es-1:9200"])
    assert cfg.url == "https://es-0:9200" and cfg.basic_auth is not None
    assert cfg.basic_auth.password.get_secret_value() == "p@ss"
    client = client_from_config(cfg)
    assert sorted(n.host for n in client.transport.node_pool.all()) == ["es-0", "es-1"]
    with pytest.raises(ValueError, match="not an http"):
        ElasticsearchConfig(url="es:9200")
    with pytest.raises(ValueError, match="index"):
        ElasticsearchConfig(url="http://es:9200", index="Bad Index")


async def test_memory_does_not_grow_with_the_outage(tmp_path: Path) -> None:
    import tracemalloc

    with EsStandIn() as es:
        s = Stack(tmp_path, es.url)
        es.down = True
        body = {"model": "ctr", "version": "1", "what": "x" * 400}
        s.audit.record_many([("request", f"warm-{i}", T0, body) for i in range(200)])
        await s.sender.drain_now()  # one failed try: the client and its connection pool exist
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for j in range(20):  # 4,000 more events (~2 MB of bodies) while Elasticsearch stays down
            s.audit.record_many([("request", f"e-{j}-{i}", T0 + j, body) for i in range(200)])
        grown = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        assert len(s.outbox) == 4200
        assert grown < 256 * 1024, grown  # the waiting events are on disk, not in memory
        es.down = False
        await s.sender.flush()
        await s.sender.shutdown()
    assert len(es.creates) == 4200


async def test_several_nodes_a_dead_node_is_passed_over(tmp_path: Path) -> None:
    with EsStandIn() as a, EsStandIn() as b:
        a.down = True
        s = Stack(tmp_path, a.url)
        await s.bulk.client.close()
        s.bulk.client = client_from_config(ElasticsearchConfig(url=a.url, urls=[b.url]))
        for i in range(120):
            s.audit.record("change", f"c-{i:03d}", T0 + i, {})
        await s.sender.flush()
        await s.sender.shutdown()
    assert a.creates == [] and a.requests >= 1  # it was tried, and failed
    assert b.creates == [f"c-{i:03d}" for i in range(120)]
    assert s.value("sidecar_export_failed_total", {**ES, "reason": "connect"}) >= 1


async def test_wiring_takes_an_injected_client_factory_and_the_client_speaks_httpx(tmp_path: Path) -> None:
    """The ES client is injected by wiring (a factory of the official client), not built inside the exporter;
    the default factory's nodes are elastic_transport's httpx node, the one HTTP library of the sidecar."""
    from functools import partial

    import httpx
    from elastic_transport import HttpxAsyncHttpNode

    from sidecar.config import parse_config
    from sidecar.service import Service
    from sidecar.wiring.alerting import build as alerting_build

    made: list[Any] = []

    def factory(cfg: ElasticsearchConfig) -> Any:
        made.append(client_from_config(cfg))
        return made[-1]

    with EsStandIn() as es:
        config = parse_config({"alerting": {"enabled": True, "audit": {"elasticsearch": {"url": es.url}}}})
        svc = Service(
            config,
            clock=FakeClock(T0),
            http=httpx.AsyncClient(),
            registry=CollectorRegistry(),
            store=Store(tmp_path / "s.sqlite"),
            factories=[partial(alerting_build, es_client=factory)],
        )
        audit: Any = svc.component("audit")
        assert len(made) == 1
        nodes = made[0].transport.node_pool.all()
        assert nodes and all(isinstance(n, HttpxAsyncHttpNode) for n in nodes)
        assert audit.record("change", "c-inj", T0, {"what": "deploy"})
        await audit.es.flush()
        await svc.shutdown()
    assert es.creates == ["c-inj"]
