"""The /traces "why" column: one line per trace, without literal escape sequences or server file paths, the
reason kept; the whole reason in the tooltip when the line is cut; the waterfall's panel keeps the message
as sent."""

from __future__ import annotations

import dataclasses

from pagetree import parse
from test_trace_views import TID, _hub, _page, _spans

from sidecar.pages.traces import WHY_CHARS, render_list
from sidecar.pages.waterfall import one_line

# A Python backend's error as a client JSON-encoded it twice: the line breaks arrive as backslash + n.
PY_ERROR = (
    "Failed to process the request(s) for model 'fraud_0_0', message: ValueError: amount is NaN"
    "\\n\\nAt:\\n  /models/fraud/1/model.py(42): execute\\n"
    "  /opt/tritonserver/backends/python/triton_python_backend_utils.py(112): run\\n"
)


def _with_error(message: str) -> list:  # type: ignore[type-arg]
    return [dataclasses.replace(s, status_message=message) if s.is_error else s for s in _spans()]


def test_the_why_is_one_line_without_escapes_or_server_paths_and_keeps_the_reason() -> None:
    hub = _hub(_with_error(PY_ERROR))
    cell = parse(render_list(hub, None, None, False)).by_id("traces").find_all("tr")[1].find("td", cls="why")
    why = cell.text()
    assert "\\n" not in why and "\n" not in why and "  " not in why
    assert "/models/" not in why and "/opt/" not in why and "/" not in why.split("message:")[1]
    assert "ValueError: amount is NaN" in why and "model.py(42): execute" in why
    assert why.startswith("span 'postprocess' ended with an error status: Failed to process")


def test_real_line_breaks_and_windows_paths_too_and_urls_are_left_alone() -> None:
    assert one_line("boom\r\n\tAt:\n  C:\\models\\x\\model.py(3): run") == "boom At: model.py(3): run"
    text = "POST /v1/recommend to http://triton:8000/v2/models/ctr/infer failed"
    assert one_line(text) == text
    assert one_line("in /workspace/src/backend_model.cc:123: out of memory") == "in backend_model.cc:123: out of memory"


def test_a_long_reason_is_cut_with_the_whole_in_the_tooltip() -> None:
    long = "x" * (WHY_CHARS + 50)
    hub = _hub(_with_error(long))
    cell = parse(render_list(hub, None, None, False)).by_id("traces").find_all("tr")[1].find("td", cls="why")
    assert len(cell.text()) <= WHY_CHARS and cell.text().endswith("\u2026")
    assert cell.attrs["title"].endswith(long)


def test_the_waterfall_note_is_cleaned_and_the_span_panel_keeps_the_message_as_sent() -> None:
    doc = _page(_hub(_with_error(PY_ERROR)), TID)
    note = doc.by_id("why").text()
    assert "\\n" not in note and "/opt/" not in note and "triton_python_backend_utils.py(112): run" in note
    panel = doc.by_id("span-a000000000000004").text()
    assert "/models/fraud/1/model.py(42)" in panel


def test_the_message_under_an_error_bar_is_one_clean_line_of_at_most_160_characters() -> None:
    doc = _page(_hub(_with_error(PY_ERROR)), TID)
    (msg,) = doc.find_all("text", cls="errmsg")
    assert "\\n" not in msg.text() and "/models/" not in msg.text() and len(msg.text()) <= len("✖ ERROR: ") + 160
    assert "ValueError: amount is NaN" in msg.text()
