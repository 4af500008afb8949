"""By default an alert's runbook link points at the sidecar itself, which serves docs/runbooks as pages, so the
link works with no internet; a configured base URL replaces it."""

from __future__ import annotations

from pathlib import Path

import httpx
from alerting_helpers import make_service
from prometheus_client import CollectorRegistry

from sidecar.app import create_app
from sidecar.clock import FakeClock
from sidecar.model import Finding

T0 = 1_700_000_000.0
CFG = {"alerting": {"enabled": True, "changes": {"poll_repository": False}}, "server": {"public_url": "http://sc"}}


def _ctr() -> Finding:
    return Finding(
        check="ctr_mean_down",
        kind="business",
        labels={"model": "ctr", "version": "all"},
        active=True,
        value=0.03,
        threshold=0.15,
        window_secs=60,
        severity="high",
        annotations={"runbook": "ctr-mean-down.md"},
        facts={"display_name": "CTR mean"},
    )


async def test_the_default_runbook_link_is_served_by_the_sidecar(tmp_path: Path) -> None:
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0))
    book = svc.component("alert_book")
    book.on_findings([_ctr()], T0)  # type: ignore[attr-defined]
    (a,) = book.alerts.values()  # type: ignore[attr-defined]
    url = a.annotations["runbook_url"]
    assert url == "http://sc/runbooks/ctr-mean-down.md"
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.get(url)
        assert r.status_code == 200 and '<h1 id="title">CtrMeanDown</h1>' in r.text
        assert r.headers["content-type"].startswith("text/html")
        index = await c.get("/runbooks", follow_redirects=True)  # the status page's link, without the slash
        assert index.status_code == 200 and '<a href="/runbooks/FeatureDrifting.md">FeatureDrifting</a>' in index.text
    await svc.shutdown()


async def test_unknown_or_escaping_runbook_names_get_a_clear_404_and_are_counted(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    svc = make_service(tmp_path, CFG, clock=FakeClock(T0), registry=reg)
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        r = await c.get("/runbooks/NoSuchAlert.md")
        assert r.status_code == 404 and "no runbook NoSuchAlert.md" in r.json()["detail"]
        r = await c.get("/runbooks/..%2F..%2Fpyproject.toml")
        assert r.status_code == 404
    assert reg.get_sample_value("sidecar_runbook_requests_refused_total", {"reason": "unknown"}) == 2
    await svc.shutdown()


def test_a_configured_base_url_replaces_the_sidecar(tmp_path: Path) -> None:
    svc = make_service(tmp_path, {**CFG, "runbook_url": "https://wiki.example/rb/"}, clock=FakeClock(T0))
    book = svc.component("alert_book")
    book.on_findings([_ctr()], T0)  # type: ignore[attr-defined]
    (a,) = book.alerts.values()  # type: ignore[attr-defined]
    assert a.annotations["runbook_url"] == "https://wiki.example/rb/ctr-mean-down.md"


def test_the_runbooks_ship_inside_the_package() -> None:
    import tomllib

    from sidecar.alerting.runbook_pages import RUNBOOKS_DIR

    root = Path(__file__).resolve().parents[2]
    docs = {p.name for p in (root / "docs" / "runbooks").glob("*.md")}
    assert docs and {p.name for p in RUNBOOKS_DIR.glob("*.md")} == docs
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sidecar"]
    assert "alerting/runbooks/*.md" in data  # build_py copies the linked folder's files into the wheel
