"""The trace pages: rendering unit checks, and headless Chromium against a live sidecar (bar order,
proportion)."""

from __future__ import annotations

import struct
import time
import zlib
from pathlib import Path

import httpx
import orjson
import pytest
from chromium import chromium
from prometheus_client import CollectorRegistry
from traces_helpers import live_sidecar

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.pages.traces import ERROR_COLOR, order_spans, render_list, render_trace
from sidecar.state.trace_hub import TraceHub

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
T0 = 1_800_000_000_000_000_000
MS = 1_000_000
# (span id, parent, name, start ms, end ms, error): the expected depth-first order top to bottom.
SHAPE = [
    ("a000000000000001", None, "InferRequest", 0, 100, False),
    ("a000000000000002", "a000000000000001", "ctr", 5, 95, False),
    ("a000000000000003", "a000000000000002", "compute", 30, 90, False),
    ("a000000000000004", "a000000000000001", "postprocess", 95, 99, True),
]


def _otlp(extra: int = 0) -> bytes:
    def span(sid: str, parent: str | None, name: str, a: float, b: float, err: bool) -> dict[str, object]:
        d: dict[str, object] = {
            "traceId": TID,
            "spanId": sid,
            "name": name,
            "kind": 2,
            "startTimeUnixNano": str(int(T0 + a * MS)),
            "endTimeUnixNano": str(int(T0 + b * MS)),
        }
        if parent:
            d["parentSpanId"] = parent
        if err:
            d["status"] = {"code": 2, "message": "boom"}
        if name == "ctr":
            d["attributes"] = [
                {"key": "triton.model_name", "value": {"stringValue": "ctr"}},
                {"key": "triton.model_version", "value": {"intValue": "2"}},
            ]
        return d

    spans = [span(*s) for s in SHAPE]
    # Filler spans under compute so the page carries 200 spans (it must stay fast and readable).
    spans += [
        span(f"b{i:015x}", "a000000000000003", f"op-{i}", 30 + i * 0.3, 30.2 + i * 0.3, False) for i in range(extra)
    ]
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "triton-inference-server"}}]
                    },
                    "scopeSpans": [{"spans": spans}],
                }
            ]
        }
    )


def _hub() -> TraceHub:
    cfg = parse_config({"traces": {"enabled": True, "slow_threshold_ms": 50}}).traces
    hub = TraceHub(cfg, registry=CollectorRegistry(), clock=FakeClock())
    from sidecar.sources.otlp.decode import decode_json

    hub.ingest(decode_json(_otlp()).spans, "test")
    return hub


def test_order_is_depth_first_by_start():
    hub = _hub()
    e = hub.store.get(TID)
    assert e is not None
    assert [(s.span_id, d) for s, d in order_spans(e.spans)] == [
        ("a000000000000001", 0),
        ("a000000000000002", 1),
        ("a000000000000003", 2),
        ("a000000000000004", 1),
    ]


def test_trace_page_marks_errors_and_escapes_names():
    hub = _hub()
    e = hub.store.get(TID)
    assert e is not None
    page = render_trace(e)
    assert page.count('class="bar"') == 4
    assert ERROR_COLOR in page and "\u2716 postprocess" in page
    assert "100.0 ms" in page  # total duration inline
    assert "<script" not in page
    lst = render_list(hub, "ctr", "2", False)
    assert TID in lst and "slow" in lst and "failed" in lst
    assert TID not in render_list(hub, "rank", None, False)


# ---------------------------------------------------------------- Chromium


def _png_pixels(png: bytes) -> list[list[tuple[int, int, int]]]:
    """A minimal PNG decoder (8-bit RGB/RGBA, not interlaced): enough for a Chromium screenshot clip."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos : pos + 8])
        data = png[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", data)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += data
        pos += 12 + n
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return [[(r[x * bpp], r[x * bpp + 1], r[x * bpp + 2]) for x in range(width)] for r in rows]


def _hex(c: str) -> tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


@pytest.mark.chromium
def test_waterfall_in_headless_chromium(tmp_path: Path):
    with live_sidecar({"slow_threshold_ms": 50}) as (url, _svc):
        r = httpx.post(f"{url}/v1/traces", content=_otlp(extra=196), headers={"content-type": "application/json"})
        assert r.status_code == 200
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            t = time.monotonic()
            page.goto(f"{url}/traces/{TID}", wait_until="load")
            load_s = time.monotonic() - t
            bars = page.eval_on_selector_all(
                "rect.bar",
                """els => els.map(e => {
                const b = e.getBoundingClientRect();
                return {id: e.dataset.spanId, x: b.x, y: b.y, w: b.width, h: b.height,
                        fill: e.getAttribute('fill')}; })""",
            )
            page.screenshot(path=str(tmp_path / "waterfall.png"), full_page=False)
            clips = []
            for b in [b for b in bars if b["id"].startswith("a")]:
                png = page.screenshot(
                    full_page=True,
                    clip={
                        "x": b["x"] + b["w"] / 2 - 1,
                        "y": b["y"] + b["h"] / 2 - 1,
                        "width": 2,
                        "height": 2,
                    },
                )
                clips.append(_png_pixels(png)[0][0])
            page.goto(f"{url}/traces?model=ctr")
            listed = page.eval_on_selector_all("td a", "els => els.map(e => e.getAttribute('href'))")
            page.goto(f"{url}/traces?model=rank")
            none_listed = page.eval_on_selector_all("td a", "els => els.length")
    assert len(bars) == 200
    assert load_s < 5
    top4 = [b for b in bars if b["id"].startswith("a")]
    # The right order: parent, child, grandchild (with its 196 children right below it), then the late
    # sibling.
    assert [b["id"] for b in top4] == [s[0] for s in SHAPE]
    assert [bars.index(b) for b in top4] == [0, 1, 2, 199]
    assert all(top4[i]["y"] < top4[i + 1]["y"] for i in range(3))
    px_per_ms = top4[0]["w"] / 100  # ... and the right proportion on the shared axis
    for b, (_, _, _, a, z, _) in zip(top4, SHAPE, strict=True):
        assert b["w"] == pytest.approx((z - a) * px_per_ms, abs=1.0)
        assert b["x"] - top4[0]["x"] == pytest.approx(a * px_per_ms, abs=1.0)
    assert top4[3]["fill"] == ERROR_COLOR
    for (r_, g_, b_), bar in zip(clips, top4, strict=True):  # the screenshot really shows each bar's colour
        want = _hex(bar["fill"])
        assert max(abs(r_ - want[0]), abs(g_ - want[1]), abs(b_ - want[2])) <= 8, (bar, (r_, g_, b_))
    assert listed == [f"/traces/{TID}"]
    assert none_listed == 0
