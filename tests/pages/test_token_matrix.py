"""docs/security.md's token table is what the app does: for every row (the tokens set) and every column (a group
of routes), each credential (none, each token, a wrong one) opens the group exactly when the cell names it.

The test reads the table from the document, so the document cannot drift from the code."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import factories
from sidecar.wiring.traces import build as traces

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
TOKENS = {"read": "r34d-token", "admin": "adm1n-token", "push": "pu5h-token"}
CREDENTIALS = {"no token": None, **TOKENS, "wrong": "not-a-token"}

Request = Callable[[TestClient, dict[str, str]], httpx.Response]

OTLP = b'{"resourceSpans": []}'
EVENT = {"model": "ctr", "version": "1", "features": {"x": 1.0}}
# The requests of each column of the table (routes of that group the build serves); each must agree.
COLUMNS: dict[str, list[Request]] = {
    "pages": [lambda c, h: c.get("/", headers=h), lambda c, h: c.get("/drift", headers=h)],
    "GET /v1/*": [
        lambda c, h: c.get("/v1/alerts", headers=h),
        lambda c, h: c.get("/v1/changes", headers=h),
        lambda c, h: c.get("/v1/audit", headers=h),
    ],
    "/metrics": [lambda c, h: c.get("/metrics", headers=h)],
    "/healthz": [lambda c, h: c.get("/healthz", headers=h)],
    "/readyz": [lambda c, h: c.get("/readyz", headers=h)],
    "push POSTs": [
        lambda c, h: c.post("/v1/changes", json={"what": "deploy", "id": "d1"}, headers=h),
        lambda c, h: c.post("/v1/events", json=[EVENT], headers=h),
        lambda c, h: c.post("/v1/traces", content=OTLP, headers={"content-type": "application/json", **h}),
    ],
    "/admin/*": [lambda c, h: c.get("/admin/drift/references", headers=h)],
}


def _table() -> dict[str, dict[str, set[str]]]:
    """{row: {column: the credentials that open it}} from the table under "Which token opens what"."""
    text = DOC.read_text()
    section = text.split("### Which token opens what", 1)[1].splitlines()
    start = next(i for i, ln in enumerate(section) if ln.startswith("| tokens set |"))
    lines = []
    for ln in section[start:]:  # the table ends at its first line that is not a row
        if not ln.startswith("|"):
            break
        lines.append(ln)
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[0] == "tokens set" and head[1:] == list(COLUMNS), head
    out: dict[str, dict[str, set[str]]] = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if set(cells[0]) <= {"-"}:
            continue
        out[cells[0]] = {
            col: set(CREDENTIALS) if cell == "anyone" else {t.strip() for t in cell.split(",")}
            for col, cell in zip(head[1:], cells[1:], strict=True)
        }
    return out


TABLE = _table()


def _app(tmp_path: Path, row: str) -> tuple[TestClient, Service]:
    names = [] if row == "none" else [t.strip() for t in row.split("+")]
    server = {f"{n}_token": TOKENS[n] for n in names}
    cfg = parse_config(
        {
            "server": server,
            "triton": {"enabled": False},
            "alerting": {"enabled": True},
            "traces": {"enabled": True},
            "checks": {"drift": {"enabled": True, "reference": {"mode": "pinned", "pinned_events": 100}}},
        }
    )
    drift, pages = factories()
    svc = Service(
        cfg,
        clock=FakeClock(1_800_000_000.0),
        registry=CollectorRegistry(),
        store=Store(tmp_path / "s.sqlite"),
        factories=[alerting, traces, events, drift, pages],
    )
    return TestClient(create_app(svc, manage_lifecycle=False)), svc


def test_the_table_has_every_combination_of_tokens() -> None:
    combos = {"none", "read", "admin", "push", "read + admin", "read + push", "admin + push", "read + admin + push"}
    assert set(TABLE) == combos
    assert all(re.fullmatch(r"[a-z +]+", r) for r in TABLE)


@pytest.mark.parametrize("row", list(TABLE))
def test_each_cell_opens_for_exactly_the_tokens_it_names(tmp_path: Path, row: str) -> None:
    client, svc = _app(tmp_path, row)
    wrong: list[str] = []
    with client as c:
        for col, requests in COLUMNS.items():
            opens = TABLE[row][col]
            for cred, token in CREDENTIALS.items():
                for request in requests:
                    r = request(c, {"Authorization": f"Bearer {token}"} if token else {})
                    allowed = r.status_code != 401
                    if allowed != (cred in opens) or (allowed and r.status_code >= 400 and col != "/readyz"):
                        wrong.append(f"{col} with {cred}: {r.request.url.path} {r.status_code} {r.text[:120]}")
    assert wrong == [], f"row {row!r}:\n" + "\n".join(wrong)
    closed = sum(len(set(CREDENTIALS) - TABLE[row][col]) * len(COLUMNS[col]) for col in COLUMNS)
    refused = sum(
        s.value
        for f in svc.registry.collect()
        if f.name == "sidecar_http_refused"
        for s in f.samples
        if s.name.endswith("_total") and s.labels["reason"] == "unauthorized"
    )
    assert refused == closed  # every 401 was counted


def test_an_admin_write_takes_the_same_token_as_an_admin_read(tmp_path: Path) -> None:
    """PUT /admin/* follows the /admin/* column too (the read gate only sees GET/HEAD)."""
    body = {"mode": "pinned", "pinned_events": 100}
    for row in ("read", "read + admin", "admin"):
        client, _ = _app(tmp_path / row.replace(" ", ""), row)
        with client as c:
            for cred, token in CREDENTIALS.items():
                h = {"Authorization": f"Bearer {token}"} if token else {}
                r = c.put("/admin/drift/references/ctr", json=body, headers=h)
                assert (r.status_code != 401) == (cred in TABLE[row]["/admin/*"]), (row, cred, r.status_code)
                assert r.status_code in (200, 401), r.text
