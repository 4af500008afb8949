"""The status, alerts and trace pages as headless Chromium lays them out (the showcase sidecar of
tests/pages/showcase.py): the local stylesheet applies, no card's content spills over its edge or onto another
card, an error span's message lies inside the waterfall, and every page fits a 1400 px and a 390 px window
during the showcase's drift."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from app_server import AppServer
from chromium import chromium
from showcase import EVERY, FAILED, OVER, build

from sidecar.app import create_app


@pytest.fixture
def url() -> Iterator[str]:
    with AppServer(create_app(build())) as base:
        yield base


@pytest.mark.chromium
def test_pages_lay_out_without_overlap_or_overflow(url: str) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{url}/", wait_until="load")
        header_bg = page.eval_on_selector("header.top", "e => getComputedStyle(e).backgroundColor")
        cards = page.eval_on_selector_all(
            ".card",
            """els => els.map(e => { const b = e.getBoundingClientRect();
            return {id: e.id, x: b.x, y: b.y, r: b.right, b: b.bottom, over: e.scrollWidth - e.clientWidth}; })""",
        )
        over = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        page.goto(f"{url}/alerts", wait_until="load")
        alerts_over = page.evaluate(over)
        page.goto(f"{url}/changes", wait_until="load")
        changes_over = page.evaluate(over)
        page.goto(f"{url}/drift", wait_until="load")
        drift_over = page.evaluate(over)
        page.goto(f"{url}/traces/{FAILED}", wait_until="load")
        span = "e => { const b = e.getBoundingClientRect(); return [b.x, b.right]; }"
        svg = page.eval_on_selector("#waterfall", span)
        msg = page.eval_on_selector("text.errmsg", span)
    assert header_bg == "rgb(29, 43, 58)"  # /static/pages/pages.css was served and applied
    assert {c["id"] for c in cards} == {
        "triton",
        "alerts",
        "drift",
        "verdicts",
        "gpus",
        "changes",
        "readiness",
        "links",
    }
    for c in cards:
        assert c["over"] <= 1, c  # nothing wider than its card
    for i, a in enumerate(cards):
        for b in cards[i + 1 :]:
            apart = a["r"] <= b["x"] or b["r"] <= a["x"] or a["b"] <= b["y"] or b["b"] <= a["y"]
            assert apart, (a, b)
    assert (alerts_over, changes_over, drift_over) == (0, 0, 0)  # each table fits a 1400 px window
    assert svg[0] <= msg[0] and msg[1] <= svg[1]


@pytest.mark.chromium
@pytest.mark.parametrize("width", [1400, 390])
def test_every_page_fits_the_window_during_a_drift(url: str, width: int) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        over, text = {}, {}
        for name, path in EVERY:
            page.goto(url + path, wait_until="load")
            over[name] = page.evaluate(OVER)
            text[name] = page.inner_text("body")
            if name == "status":  # the changes card: every change shown (none hidden as a header row)
                cards = page.eval_on_selector_all(".card", "els => els.map(e => [e.id, e.scrollWidth - e.clientWidth])")
                shown = page.eval_on_selector_all(
                    "section#changes tr", "rs => rs.filter(r => r.getClientRects().length > 0).length"
                )
            if name == "drift":
                label = page.eval_on_selector(
                    "#drift td[data-l='statistic now']", "e => getComputedStyle(e, '::before').content"
                )
    assert over == dict.fromkeys(over, 0), over  # no page is wider than the window
    # The drift the showcase tells is on every screen that shows drift: the alert, the list, the detail.
    for name in ("status", "alerts", "drift", "drift-detail"):
        assert "in the 60s block to" in text[name] and "2 of the last 3 60s blocks" in text[name], name
    assert all(over <= 1 for _, over in cards), cards  # nothing wider than its card, nothing to scroll sideways
    assert shown == 3, shown  # the showcase's three changes, the newest included
    # On a phone each figure of /drift is named (its column header is not shown there).
    assert label == ('"statistic now: "' if width == 390 else "none"), label
