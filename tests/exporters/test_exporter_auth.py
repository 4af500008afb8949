"""Alertmanager and Elasticsearch auth: basic, bearer (from env), TLS CA and client certificate; a password in a
URL is moved into basic auth at load and never shows in logs, /metrics or /readyz."""

from __future__ import annotations

import base64
import logging
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from alerting_helpers import make_service
from es_standin import EsStandIn
from prometheus_client import CollectorRegistry, generate_latest

from exporters.alertmanager import AlertmanagerExporter
from exporters.audit_outbox import DeadLetters, EsDoc
from exporters.config import AlertmanagerConfig, ElasticsearchConfig
from exporters.elasticsearch import ElasticsearchBulk, client_from_config
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ConfigError
from sidecar.store import Store

T0 = 1_700_000_000.0
SECRET = "hunter2-s3cr3t"


def _notice(name: str) -> dict[str, Any]:
    return {"labels": {"alertname": name}, "annotations": {}, "startsAt": "2023-11-14T22:13:20.000Z"}


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_password_in_the_alertmanager_url_goes_as_basic_auth_and_never_shows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[httpx.Request] = []
    # The refused batch of three is sent again notice by notice (each refused too) before it is dropped.
    answers: list[Any] = [
        httpx.ConnectError(f"refused http://bob:{SECRET}@am:9093"),
        httpx.Response(503),
        *[httpx.Response(400, text="bad alert")] * 4,
        httpx.Response(200),
    ]

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    caplog.set_level(logging.DEBUG)
    svc = make_service(
        tmp_path,
        {"alerting": {"enabled": True, "alertmanager": {"urls": [f"http://bob:{SECRET}@am:9093"]}}},
        transport=httpx.MockTransport(handler),
    )
    am = svc.component("alertmanager")
    for name in ("A", "B", "C"):
        am.enqueue([_notice(name)])
        await am.flush_all()
    am.enqueue([_notice("D")])
    assert await am.flush_all() == {"http://am:9093": "empty"}
    assert len(seen) == 7
    assert all(str(r.url) == "http://am:9093/api/v2/alerts" for r in seen)
    assert all(r.headers["authorization"] == _basic("bob", SECRET) for r in seen)
    metrics = generate_latest(svc.registry).decode()
    assert 'alertmanager="http://am:9093"' in metrics
    ok, details = svc.readiness()
    assert ok and "http://am:9093" in details["alertmanager"]
    assert "Alertmanager http://am:9093 refused" in caplog.text  # the logs do name the Alertmanager...
    rows = svc.component("audit").events(kind="alert_delivery_failed")
    assert sorted(r["labels"]["alertname"] for r in rows) == ["A", "B", "C"]
    for text in (caplog.text, metrics, str(details), repr(svc.config.alerting.alertmanager), str(rows)):
        assert SECRET not in text  # ...but never its password


async def test_bearer_token_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AM_TOKEN", SECRET)
    seen: list[httpx.Request] = []
    cfg = parse_config(
        {"alerting": {"alertmanager": {"urls": ["http://am:9093"], "bearer_token": "${env:AM_TOKEN}"}}}
    ).alerting.alertmanager
    assert SECRET not in repr(cfg)
    am = AlertmanagerExporter(
        cfg,
        registry=CollectorRegistry(),
        clock=FakeClock(T0),
        store=Store(tmp_path / "s"),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200))),
    )
    am.enqueue([_notice("A")])
    await am.flush_all()
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"


async def test_elasticsearch_basic_auth_from_the_url_and_password_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ES_PASSWORD", SECRET)
    cfg = ElasticsearchConfig.model_validate({"url": "https://elastic:x@es:9200"})
    assert cfg.url == "https://es:9200" and cfg.basic_auth is not None and cfg.basic_auth.username == "elastic"
    with EsStandIn() as es:  # the real client, against the local stand-in (tests/exporters/es_standin.py)
        cfg = parse_config(
            {
                "alerting": {
                    "audit": {
                        "elasticsearch": {
                            "url": es.url,
                            "basic_auth": {"username": "elastic", "password": "${env:ES_PASSWORD}"},
                        }
                    }
                }
            }
        ).alerting.audit.elasticsearch
        assert cfg is not None
        reg = CollectorRegistry()
        bulk = ElasticsearchBulk(
            cfg,
            client=client_from_config(cfg),
            registry=reg,
            clock=FakeClock(T0),
            dead_letters=DeadLetters(Store(":memory:"), max_rows=10, registry=reg),
        )
        assert await bulk.send([EsDoc(1, "a", "sidecar-audit-2023.11.14", b'{"k": 1}')]) == []
        await bulk.aclose()
    assert es.auth and es.auth[0] == _basic("elastic", SECRET)
    assert set(es.auth) == {_basic("elastic", SECRET)}  # the template, the policy and the bulk


@pytest.mark.parametrize(
    ("section", "extra", "path"),
    [
        (
            {"alertmanager": {"urls": ["http://a:b@am:9093"], "basic_auth": {"username": "a", "password": "c"}}},
            {},
            "alerting.alertmanager",
        ),
        ({"alertmanager": {"urls": ["http://a:b@am-0:9093", "http://a:z@am-1:9093"]}}, {}, "alerting.alertmanager"),
        (
            {
                "alertmanager": {
                    "urls": ["http://am:9093"],
                    "bearer_token": "t",
                    "basic_auth": {"username": "a", "password": "b"},
                }
            },
            {},
            "alerting.alertmanager",
        ),
        (
            {"audit": {"elasticsearch": {"url": "http://es:9200", "api_key": "k", "bearer_token": "t"}}},
            {},
            "alerting.audit.elasticsearch",
        ),
        (
            {"alertmanager": {"urls": ["http://am:9093"], "tls": {"ca_file": "/nonexistent/ca.pem"}}},
            {},
            "alerting.alertmanager.tls.ca_file",
        ),
    ],
)
def test_conflicting_or_missing_credentials_are_config_errors_naming_the_field(
    section: dict[str, Any], extra: dict[str, Any], path: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"alerting": section, **extra})
    assert err.value.path == path
    assert "b@" not in str(err.value) and ":b" not in str(err.value)


# -- TLS against a real HTTPS server with a self-signed certificate -----------------------------------------------


def _self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}-key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _serve(cert: Path, key: Path, client_ca: Path | None) -> tuple[ThreadingHTTPServer, list[str]]:
    got: list[str] = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    if client_ca is not None:  # mutual TLS: only clients with a certificate this CA signed get in
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(str(client_ca))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, got


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    cert, key = _self_signed(tmp_path, "server")
    srv, got = _serve(cert, key, None)
    try:
        yield f"https://localhost:{srv.server_address[1]}", cert, got
    finally:
        srv.shutdown()
        srv.server_close()


async def test_tls_ca_file_lets_a_self_signed_alertmanager_in_and_without_it_the_notice_waits(
    tmp_path: Path, https_server: tuple[str, Path, list[str]]
) -> None:
    url, cert, got = https_server

    def exporter(tls: dict[str, Any] | None, store: Store) -> AlertmanagerExporter:
        cfg = AlertmanagerConfig.model_validate({"urls": [url], **({"tls": tls} if tls else {})})
        return AlertmanagerExporter(
            cfg, registry=CollectorRegistry(), clock=FakeClock(T0), store=store, http=httpx.AsyncClient()
        )

    store = Store(tmp_path / "s.sqlite")
    plain = exporter(None, store)
    plain.enqueue([_notice("A")])
    assert await plain.flush_all() == {url: "retry"} and got == []  # the system CAs do not know this server
    trusting = exporter({"ca_file": str(cert)}, store)
    assert await trusting.flush_all() == {url: "empty"}
    assert '"alertname":"A"' in got[0]
    await trusting.shutdown()
    assert trusting.http.is_closed  # its own client (TLS settings are per client in httpx) is closed with it


async def test_client_certificate_gets_past_a_server_that_requires_one(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "server")
    client_cert, client_key = _self_signed(tmp_path, "client")
    srv, got = _serve(cert, key, client_ca=client_cert)
    url = f"https://localhost:{srv.server_address[1]}"
    store = Store(tmp_path / "s.sqlite")
    try:
        for tls, outcome in (
            ({"ca_file": str(cert)}, "retry"),
            ({"ca_file": str(cert), "cert_file": str(client_cert), "key_file": str(client_key)}, "empty"),
        ):
            am = AlertmanagerExporter(
                AlertmanagerConfig.model_validate({"urls": [url], "tls": tls}),
                registry=CollectorRegistry(),
                clock=FakeClock(T0),
                store=store,
                http=httpx.AsyncClient(),
            )
            am.enqueue([_notice("A")])
            assert await am.flush_all() == {url: outcome}
            await am.shutdown()
        assert len(got) == 1
    finally:
        srv.shutdown()
        srv.server_close()
