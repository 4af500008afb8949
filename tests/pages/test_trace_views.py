"""What the trace pages tell on-call (issue 13, "Trace waterfall"): the error span's status and message as
text on the page, a detail panel per span, one trace state that the header, the note and the list agree on,
no empty stage row, a legend, and on the list why a trace is marked failed."""

from __future__ import annotations

from pagetree import Node, parse
from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.model import Span, SpanEvent
from sidecar.pages.traces import render_list, render_trace
from sidecar.pages.waterfall import ERROR_COLOR
from sidecar.state.trace_hub import TraceHub

TID = "5bf92f3577b34da6a3ce929d0e0e4736"
T0 = 1_800_000_000_000_000_000
MS = 1_000_000
MODEL = {"triton.model_name": "ctr", "triton.model_version": "2"}


def _ev(name: str, ms: float) -> SpanEvent:
    return SpanEvent(name, int(T0 + ms * MS))


def _spans(tid: str = TID, *, error: bool = True, stages: bool = True) -> list[Span]:
    model_events = (_ev("REQUEST_START", 2), _ev("QUEUE_START", 3), _ev("REQUEST_END", 90)) if stages else ()
    compute_events = (
        (
            _ev("COMPUTE_START", 30),
            _ev("COMPUTE_INPUT_END", 35),
            _ev("COMPUTE_OUTPUT_START", 80),
            _ev("COMPUTE_END", 88),
        )
        if stages
        else ()
    )
    return [
        Span(
            tid,
            "a000000000000001",
            None,
            "InferRequest",
            T0,
            T0 + 100 * MS,
            service_name="gateway",
            attributes={"http.route": "/v2/models/ctr/infer"},
        ),
        Span(
            tid,
            "a000000000000002",
            "a000000000000001",
            "ctr",
            T0 + 2 * MS,
            T0 + 90 * MS,
            service_name="triton-inference-server",
            attributes=MODEL,
            events=model_events,
        ),
        Span(
            tid,
            "a000000000000003",
            "a000000000000002",
            "compute",
            T0 + 30 * MS,
            T0 + 88 * MS,
            service_name="triton-inference-server",
            events=compute_events,
        ),
        Span(
            tid,
            "a000000000000004",
            "a000000000000001",
            "postprocess",
            T0 + 90 * MS,
            T0 + 99 * MS,
            service_name="gateway",
            status_code=2 if error else 0,
            status_message="feature store timed out" if error else "",
        ),
    ]


def _hub(*traces: list[Span]) -> TraceHub:
    cfg = parse_config({"traces": {"enabled": True, "slow_threshold_ms": 50}}).traces
    hub = TraceHub(cfg, registry=CollectorRegistry(), clock=FakeClock())
    for spans in traces:
        hub.ingest(spans, "test")
    return hub


def _page(hub: TraceHub, tid: str = TID) -> Node:
    e = hub.store.get(tid)
    assert e is not None
    return parse(render_trace(e))


def _outside_tooltips(n: Node) -> bool:
    return all(a.tag != "title" for a in n.ancestors())


def test_error_status_and_message_are_text_on_the_page_not_only_a_tooltip() -> None:
    doc = _page(_hub(_spans()))
    # On the error span's row of the waterfall, outside any <title> (a tooltip)...
    msgs = [n for n in doc.by_id("waterfall").find_all(cls="errmsg") if _outside_tooltips(n)]
    assert [m.text().strip() for m in msgs] == ["✖ ERROR: feature store timed out"]
    # ... in the header's explanation ...
    assert "span 'postprocess' ended with an error status: feature store timed out" in doc.by_id("why").text()
    # ... and in the span's panel, which is open: the status row says ERROR and the message.
    panel = doc.by_id("span-a000000000000004")
    assert "open" in panel.attrs
    assert "ERROR: feature store timed out" in panel.find("summary").text()
    status = next(tr for tr in panel.find_all("tr") if tr.find("th").text() == "status")
    assert status.find("td").text() == "ERROR: feature store timed out"


def test_every_span_has_a_detail_panel_with_attributes_events_and_resource() -> None:
    doc = _page(_hub(_spans()))
    panels = doc.by_id("spans").find_all("details", cls="span")
    assert [p.attrs["id"] for p in panels] == [f"span-a00000000000000{i}" for i in (1, 2, 3, 4)]
    # Each bar links to its panel.
    for bar in doc.by_id("waterfall").find_all("rect", cls="bar"):
        link = next(a for a in bar.ancestors() if a.tag == "a")
        assert link.attrs["href"] == f"#span-{bar.attrs['data-span-id']}"

    def row(panel: Node, name: str) -> str:
        return next(tr for tr in panel.find_all("tr") if tr.find("th").text() == name).find("td").text()

    model = doc.by_id("span-a000000000000002")
    assert "triton.model_name = ctr" in row(model, "attributes")
    assert "triton.model_version = 2" in row(model, "attributes")
    assert row(model, "resource") == "service.name = triton-inference-server"
    assert row(model, "parent") == "a000000000000001"
    # Events with their time from the trace's start, in order.
    events = [[td.text() for td in tr.find_all("td")][:2] for tr in model.find("table").find("table").find_all("tr")]
    assert events == [["+2.000 ms", "REQUEST_START"], ["+3.000 ms", "QUEUE_START"], ["+90.0 ms", "REQUEST_END"]]
    assert row(doc.by_id("span-a000000000000001"), "events") == "none"
    assert row(doc.by_id("span-a000000000000001"), "status") == "unset"


def test_possibly_failed_is_the_one_state_of_header_note_and_list() -> None:
    ok_tid = "6bf92f3577b34da6a3ce929d0e0e4736"
    hub = _hub(_spans(error=False), _spans(ok_tid, error=False))
    # Triton counted 1 failure of ctr v2 among the 2 traced requests: which one failed is unknown.
    assert hub.store.mark_failures("ctr", "2", T0 - MS, T0 + 200 * MS, 1) == 2
    doc = _page(hub)
    assert doc.by_id("trace-state").text() == "possibly failed"
    why = doc.by_id("why")
    assert "maybe" in why.classes and "possibly failed" in why.text()
    assert "Triton counted 1 failure(s)" in why.text()
    rows = parse(render_list(hub, None, None, False)).by_id("traces").find_all("tr")[1:]
    assert {r.attrs["data-trace-id"] for r in rows} == {TID, ok_tid}
    for r in rows:
        assert r.find("td", cls="state").text().split() == ["possibly", "failed", "slow"]
        assert "Triton counted 1 failure(s)" in r.find("td", cls="why").text()


def test_a_certain_failure_from_the_counters_reads_failed_everywhere_with_the_reason() -> None:
    hub = _hub(_spans(error=False))
    assert hub.store.mark_failures("ctr", "2", T0 - MS, T0 + 200 * MS, 1) == 1
    doc = _page(hub)
    assert doc.by_id("trace-state").text() == "✖ failed"
    assert "Triton counted a failure for every traced request" in doc.by_id("why").text()
    row = parse(render_list(hub, None, None, False)).by_id("traces").find_all("tr")[1]
    assert row.find("td", cls="state").text().split()[0] == "failed"
    assert "Triton counted a failure for every traced request" in row.find("td", cls="why").text()


def test_an_ok_trace_says_ok_and_has_no_failure_note() -> None:
    doc = _page(_hub(_spans(error=False)))
    assert doc.by_id("trace-state").text() == "ok"
    assert not doc.find_all(id="why")


def test_the_list_says_why_a_trace_is_marked_failed() -> None:
    hub = _hub(_spans())
    row = parse(render_list(hub, None, None, False)).by_id("traces").find_all("tr")[1]
    assert row.find("td", cls="why").text() == "span 'postprocess' ended with an error status: feature store timed out"


def test_stage_table_has_no_row_without_stages() -> None:
    other = "7bf92f3577b34da6a3ce929d0e0e4736"
    # A model span without Triton's timestamps (tracing level without TIMESTAMPS) gives no row, and no table.
    doc = _page(_hub(_spans(other, stages=False)), other)
    assert not doc.find_all(id="stages")
    doc = _page(_hub(_spans()))
    rows = doc.by_id("stages").find_all("tr")
    assert len(rows) == 2  # the head and the one model span
    cells = [td.text() for td in rows[1].find_all("td")]
    assert cells[0] == "ctr v2"
    heads = [th.text() for th in rows[0].find_all("th")]
    got = dict(zip(heads[1:], cells[1:], strict=True))
    assert got["request"] == "88.0 ms" and got["compute infer"] == "45.0 ms" and got["compute input"] == "5.000 ms"
    assert any(c != "\u2013" for c in cells[1:])  # an en dash marks a stage Triton did not time


def test_legend_explains_colours_and_event_ticks() -> None:
    legend = _page(_hub(_spans())).by_id("legend")
    swatches = [s.attrs.get("style", "") for s in legend.find_all(cls="sw")]
    assert any(ERROR_COLOR in s for s in swatches)
    text = legend.text()
    assert "error span" in text and "coloured by name" in text and "span event" in text
    assert legend.find_all(cls="tick")


def test_a_long_error_message_stays_inside_the_drawing_and_is_whole_in_its_panel() -> None:
    long = "upstream said: " + "x" * 2000
    spans = _spans()
    spans[3] = Span(
        TID,
        "a000000000000004",
        "a000000000000001",
        "postprocess",
        T0 + 90 * MS,
        T0 + 99 * MS,
        status_code=2,
        status_message=long,
    )
    doc = _page(_hub(spans))
    svg = doc.by_id("waterfall")
    msg = next(n for n in svg.find_all("text", cls="errmsg") if _outside_tooltips(n))
    # On its own line at the left (beside a late bar it would run off the drawing), and bounded.
    assert float(msg.attrs["x"]) < 100 and float(msg.attrs["y"]) < float(svg.attrs["height"])
    assert len(msg.text()) < 200 and msg.text().startswith("✖ ERROR: upstream said: xxx")
    status = next(tr for tr in doc.by_id("span-a000000000000004").find_all("tr") if tr.find("th").text() == "status")
    assert status.find("td").text() == f"ERROR: {long}"


def test_every_page_names_the_sidecar_version_in_its_header() -> None:
    from sidecar import __version__

    hub = _hub(_spans())
    for doc in (_page(hub), parse(render_list(hub, "ctr", "2", False))):
        assert doc.find(cls="ver").text() == __version__  # a page's own "version" filter must not shadow it
