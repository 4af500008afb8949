"""The demo prints one line per alert transition, from what the sidecar and Alertmanager answer."""

from __future__ import annotations

from sidecar.demo.watch import AlertWatcher, describe


def _alert(state: str, **labels: str) -> dict[str, object]:
    return {"labels": {"alertname": "CtrMeanDown", "model": "ctr", "severity": "high", **labels}, "state": state}


def test_each_transition_is_one_line_and_repeats_are_silent() -> None:
    lines: list[str] = []
    now = [0.0]
    w = AlertWatcher("http://s", "http://am", out=lines.append, clock=lambda: now[0])
    w.observe([_alert("pending", version="all")], [])
    now[0] = 20
    w.observe([_alert("firing", version="all")], [])
    w.observe([_alert("firing", version="all")], [])  # nothing new
    am = [
        {
            "labels": {"alertname": "CtrMeanDown", "model": "ctr", "severity": "high", "version": "all"},
            "status": {"state": "active"},
        }
    ]
    w.observe([_alert("firing", version="all")], am)
    w.observe([_alert("firing", version="all")], am)  # delivered once
    now[0] = 150
    w.observe([_alert("inactive", version="all")], [])
    assert [ln.split("]", 1)[1].split()[0] for ln in lines] == ["PENDING", "FIRING", "delivered", "RESOLVED"]
    assert lines[1].startswith("  [+0:20]") and lines[-1].startswith("  [+2:30]")
    assert all("CtrMeanDown ctr all versions" in ln for ln in lines)


def test_a_resolved_alert_seen_first_is_not_announced() -> None:
    lines: list[str] = []
    AlertWatcher("http://s", None, out=lines.append).observe([_alert("inactive", version="2")], None)
    assert lines == []


def test_describe_never_prints_vunversioned() -> None:
    assert describe({"alertname": "X", "model": "m", "version": "unversioned"}) == "X m all versions"
    assert describe({"alertname": "X", "model": "m", "version": "2", "feature": "f"}) == "X m v2 f"
