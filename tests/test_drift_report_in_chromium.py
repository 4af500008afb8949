"""The ``sidecar drift --html`` file as headless Chromium lays it out, opened from disk: nothing is fetched, the
page is no wider than the window at 1400 and at 390 px (the summary table scrolls in its own box, the drawings
shrink), and every drawing lies inside the window.

Also the screenshots in docs/screenshots/drift-report*.png:
``python tests/test_drift_report_in_chromium.py --shots docs/screenshots``.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))  # run as a script (--shots)
from chromium import chromium

from sidecar.drift_report import main as drift_main


def write_report(tmp: Path) -> Path:
    """A training file and a day of traffic: clicks shifted up, a new country, a device missing more often."""
    rng = np.random.default_rng(5)

    def rows(n: int, drifted: bool) -> dict[str, list[str]]:
        clicks = rng.gamma(2.0, 3.0, n) * (1.35 if drifted else 1.0)
        income = rng.normal(52_000, 9_000, n)
        age = rng.normal(38, 11, n)
        p = [0.33, 0.24, 0.19, 0.12, 0.07, 0.05] if drifted else [0.35, 0.25, 0.2, 0.12, 0.08, 0.0]
        country = np.array(["de", "fr", "es", "it", "nl", "br"])[rng.choice(6, n, p=p)]
        device = np.where(
            rng.random(n) < (0.2 if drifted else 0.02), "NA", np.where(rng.random(n) < 0.45, "ios", "android")
        )
        return {
            "clicks_7d": [f"{v:.3f}" for v in clicks],
            "income": [f"{v:.2f}" for v in income],
            "age": [f"{v:.1f}" for v in age],
            "country": [str(c) for c in country],
            "device": [str(d) for d in device],
        }

    for name, n, drifted in (("train.csv", 20_000, False), ("today.csv", 5_000, True)):
        d = rows(n, drifted)
        names = list(d)
        (tmp / name).write_text(",".join(names) + "\n" + "\n".join(",".join(d[k][i] for k in names) for i in range(n)))
    out = tmp / "drift-report.html"
    drift_main(
        ["--reference", str(tmp / "train.csv"), "--current", str(tmp / "today.csv"), "--html", str(out)],
        io.StringIO(),
        io.StringIO(),
    )
    return out


@pytest.mark.chromium
@pytest.mark.parametrize("width", [1400, 390])
def test_the_report_fits_the_window_and_fetches_nothing(tmp_path: Path, width: int) -> None:
    report = write_report(tmp_path)
    box = "els => els.map(e => { const b = e.getBoundingClientRect(); return [b.left, b.right, b.height]; })"
    requests: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri(), wait_until="load")
        over = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        svgs = page.eval_on_selector_all("svg.drift-plot", box)
        stroke = page.eval_on_selector("section.feature svg polyline.cur", "e => getComputedStyle(e).stroke")
        table = page.eval_on_selector("#summary", "e => e.getBoundingClientRect().width")
    assert requests == [report.as_uri()]  # the file itself, nothing else
    assert over == 0
    assert len(svgs) == 5 and all(left >= 0 and right <= width and h > 40 for left, right, h in svgs)
    assert stroke == "rgb(255, 127, 14)"  # the pages' stylesheet, inlined, applied to the drawing
    assert table > 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shots", type=Path, required=True, help="write drift-report.png and drift-report-390.png here")
    args = ap.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = write_report(Path(tmp))
        with chromium() as browser:
            for name, width, height in (("drift-report", 1400, 1500), ("drift-report-390", 390, 1600)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(report.as_uri(), wait_until="load")
                page.screenshot(path=str(args.shots / f"{name}.png"))


if __name__ == "__main__":
    main()
