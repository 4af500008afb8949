"""The runbooks as pages: Markdown rendered inside the pages' layout with raw HTML shown as text, every link
answered, and a table of the settings the running config gives each alert, so the page cannot disagree with
the check that fires it."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from sidecar.alerting.runbook_pages import DASHBOARDS, RUNBOOKS_DIR, RunbookPages
from sidecar.alerting.runbook_params import BUSINESS_FIELDS, SECTIONS, param_tables
from sidecar.app import create_app
from sidecar.checks.business.config import BusinessCheckConfig
from sidecar.checks.business.examples import EXAMPLE_BUSINESS_CHECKS
from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.pages.render import render
from sidecar.service import Service
from sidecar.store import Store
from sidecar.wiring.alerting import build as alerting
from sidecar.wiring.business import build as business
from sidecar.wiring.events import build as events
from sidecar.wiring.pages import build as pages

ROOT = Path(__file__).resolve().parents[2]
ALERTING = {"enabled": True, "changes": {"poll_repository": False}}


def _config(**extra: Any) -> dict[str, Any]:
    checks = copy.deepcopy(EXAMPLE_BUSINESS_CHECKS)
    return {"alerting": ALERTING, "checks": {"business": checks}, "server": {"public_url": "http://sc"}, **extra}


def _service(tmp_path: Path, raw: dict[str, Any]) -> Service:
    return Service(
        parse_config(raw),
        clock=FakeClock(1_700_000_000.0),
        store=Store(tmp_path / "state.sqlite"),
        registry=CollectorRegistry(),
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=[]))),
        factories=[alerting, business, events, pages],
    )


async def _get(svc: Service, *paths: str) -> list[httpx.Response]:
    app = create_app(svc, manage_lifecycle=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sc") as c:
        return [await c.get(p) for p in paths]


def _params(html: str) -> dict[str, str]:
    """setting path -> the value cell's text, from the page's settings tables."""
    rows = re.findall(
        r'<tr data-path="([^"]+)"><td class="name"[^>]*>.*?</td><td class="value nowrap">(.*?)</td>', html
    )
    return {path: re.sub(r"<[^>]+>", "", cell) for path, cell in rows}


class _Links(HTMLParser):
    """The hrefs inside the runbook's article and settings (the page's own top bar is not the runbook's)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "article" or (tag == "section" and a.get("id") == "params") or self.depth:
            self.depth += 1
        if tag == "a" and self.depth and a.get("href"):
            self.hrefs.append(str(a["href"]))

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1


def _links(html: str) -> list[str]:
    p = _Links()
    p.feed(html)
    return p.hrefs


async def test_a_non_default_ctr_window_is_what_the_runbook_page_shows(tmp_path: Path) -> None:
    raw = _config()
    ctr = raw["checks"]["business"]["checks"]["ctr_mean_down"]
    ctr.update(window_secs=600, bucket_secs=10, baseline_secs=3600, baseline_bucket_secs=60, threshold=0.2, for_secs=60)
    svc = _service(tmp_path, raw)
    (r,) = await _get(svc, "/runbooks/ctr-mean-down.md")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    params = _params(r.text)
    key = "checks.business.checks.ctr_mean_down."
    assert params[key + "window_secs"] == "600 (10m)"
    assert params[key + "baseline_secs"] == "3600 (1h)"
    assert params[key + "threshold"] == "0.2"
    assert params["held before firing"] == "60 (1m)"
    # The prose names the settings instead of the example's numbers, which would now be wrong.
    prose = r.text.split('<article class="runbook">')[1]
    for stale in ("24 hours", "7-day", "15 minutes", "more than 15%"):
        assert stale not in prose, stale
    assert '<header class="top">' in r.text and "/static/pages/runbook.css" in r.text  # the pages' layout
    await svc.shutdown()


async def test_an_alerting_hold_override_is_the_hold_the_page_shows(tmp_path: Path) -> None:
    raw = _config(alerting={**ALERTING, "for_secs": {"ctr_mean_down": 120}})
    svc = _service(tmp_path, raw)
    (ctr, drift, rule) = await _get(
        svc, "/runbooks/ctr-mean-down.md", "/runbooks/FeatureDrifting.md", "/runbooks/SidecarDown.md"
    )
    assert _params(ctr.text)["held before firing"] == "120 (2m)"
    assert "alerting.for_secs.ctr_mean_down" in ctr.text
    d = _params(drift.text)
    assert d["checks.drift.window_secs"] == "1800 (30m)" and d["held before firing"] == "0"
    assert "not enabled in this config" in drift.text  # drift is off in this config, and the page says so
    assert _params(rule.text) == {} and "Prometheus rule" in rule.text
    await svc.shutdown()


async def test_every_link_in_every_runbook_is_answered(tmp_path: Path) -> None:
    svc = _service(tmp_path, _config(dashboard_url="https://grafana.example/"))
    names = sorted(p.name for p in RUNBOOKS_DIR.glob("*.md"))
    pages = await _get(svc, "/runbooks/", *(f"/runbooks/{n}" for n in names))
    assert all(p.status_code == 200 for p in pages)
    index_links = set(_links(pages[0].text.replace('<ul id="runbooks">', '<article><ul id="runbooks">')))
    assert index_links == {f"/runbooks/{n}" for n in names}
    local: set[str] = set()
    external: set[str] = set()
    for name, page in zip(names, pages[1:], strict=True):
        hrefs = _links(page.text)
        assert not [h for h in hrefs if ".." in h or not h.startswith(("/", "https://"))], name
        for h in hrefs:
            (external if h.startswith("https://") else local).add(h.split("#")[0])
    assert {"/runbooks/FeatureDrifting.md", "/runbooks/FeatureMissingValuesHigh.md", "/drift", "/changes"} <= local
    answers = await _get(svc, *sorted(local))
    assert {h: a.status_code for h, a in zip(sorted(local), answers, strict=True) if a.status_code >= 400} == {}
    # The dashboard sections of docs/dashboards.md lead to Grafana's dashboards, by the uids dashboards/ gives them.
    uids = {u for f in (ROOT / "dashboards").glob("*.py") for u in re.findall(r'uid="([^"]+)"', f.read_text())}
    assert external and external <= {f"https://grafana.example/d/{u}" for u in uids}
    assert set(DASHBOARDS.values()) <= uids
    await svc.shutdown()


def test_without_grafana_other_docs_are_named_as_text_not_broken_links(tmp_path: Path) -> None:
    rp = RunbookPages(parse_config({}), registry=CollectorRegistry(), render=render)
    rb = rp.runbook("ColdStartLoad.md")
    assert rb.title == "ColdStartLoad"
    assert "verdicts (docs/verdicts.md#cold-start-watch)" in rb.body and "../verdicts.md" not in rb.body
    assert all(h.startswith("/") for h in rp.runbook("FeatureDrifting.md").links)


def test_raw_html_and_script_links_in_a_runbook_are_shown_as_text(tmp_path: Path) -> None:
    (tmp_path / "Evil.md").write_text(
        "# Evil <b>bold</b>\n\n<script>alert(1)</script>\n\nInline <img src=x onerror=alert(1)> and "
        "[click](javascript:alert(1)) and [ok](Evil.md).\n"
    )
    rp = RunbookPages(parse_config({}), registry=CollectorRegistry(), render=render, folder=tmp_path)
    rb = rp.runbook("Evil.md")
    page = render("runbook.html", name="Evil.md", runbook=rb, tables=[])
    assert "<script>" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'href="javascript' not in page and "[click](javascript:alert(1))" in page  # left as its text
    assert 'href="/runbooks/Evil.md"' in page
    assert "Evil &lt;b&gt;bold&lt;/b&gt;" in page  # the title, escaped once by the template


@pytest.mark.parametrize("runbook", sorted(SECTIONS))
def test_each_mapped_section_names_real_settings(runbook: str) -> None:
    assert (RUNBOOKS_DIR / runbook).exists()
    (table,) = param_tables(parse_config({}), runbook)  # every field resolves on the default config
    assert len(table.rows) == len(SECTIONS[runbook][0].fields) + 2
    assert all(r.meaning for r in table.rows), [r.path for r in table.rows if not r.meaning]


def test_business_fields_are_the_check_configs_fields() -> None:
    assert set(BUSINESS_FIELDS) <= set(BusinessCheckConfig.model_fields)
    cfg = parse_config(_config())
    assert [t.title for t in param_tables(cfg, "wer-high.md")] == ["checks.business.checks.wer_high"]
    assert param_tables(cfg, "business-metric.md") == []  # every example check names its own runbook
