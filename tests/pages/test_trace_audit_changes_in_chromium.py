"""/traces, a waterfall, /audit and /changes as headless Chromium lays them out at 1400 px and at a phone's
390 px (the showcase sidecar of tests/pages/showcase.py): nothing widens the page, the "why" of a trace wraps
inside its cell on one line of text, and the waterfall's "audit records of this trace" link, clicked, lists the
trace's records."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from app_server import AppServer
from chromium import chromium
from showcase import FAILED, PY_ERROR, build

from sidecar.app import create_app

OVER = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
PAGES = ("/traces", f"/traces/{PY_ERROR}", "/audit", f"/audit?trace_id={FAILED}", "/changes")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with AppServer(create_app(build())) as base:
        yield base


@pytest.mark.chromium
@pytest.mark.parametrize("width", [1400, 390])
def test_pages_fit_the_window_and_the_why_wraps_on_one_line(url: str, width: int) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        over = {}
        for path in PAGES:
            page.goto(url + path, wait_until="load")
            over[path] = page.evaluate(OVER)
        page.goto(f"{url}/traces", wait_until="load")
        why = page.eval_on_selector(
            f"tr[data-trace-id='{PY_ERROR}'] td.why",
            """e => { const b = e.getBoundingClientRect(); const s = getComputedStyle(e);
            return {text: e.innerText, right: b.right, wrap: s.overflowWrap, ws: s.whiteSpace,
                    lines: Math.round(b.height / parseFloat(s.lineHeight))}; }""",
        )
        page.goto(f"{url}/traces/{FAILED}", wait_until="load")
        page.click("#audit-link")
        page.wait_for_load_state("load")
        linked = page.eval_on_selector_all("#audit tr.audit-event", "rs => rs.map(r => r.dataset.id)")
        trace_links = page.eval_on_selector_all(f"#audit a[href='/traces/{FAILED}']", "as => as.length")
    assert over == dict.fromkeys(PAGES, 0)  # no page is wider than the window
    assert "\n" not in why["text"] and "\\n" not in why["text"] and "/models/" not in why["text"]
    assert "ValueError: clicks_7d is NaN" in why["text"]
    assert why["right"] <= width and why["wrap"] == "anywhere" and why["ws"] == "normal"
    assert why["lines"] >= 2  # one line of text, wrapped by the cell
    # Its request record, the finding it is evidence of, and the alert that finding fired (which carries the
    # finding's trace id): each once, each linking back to the trace.
    assert f"req-{FAILED}" in linked and trace_links == len(linked) == 3
    assert sorted(i.split("-", 1)[0] for i in linked) == ["finding_crossed", "fired", "req"]
