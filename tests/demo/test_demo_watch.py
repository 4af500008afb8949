"""The demo prints one line per alert transition, from what the sidecar and Alertmanager answer."""

from __future__ import annotations

from sidecar.demo.watch import ACTION, AM_ACTIVE, AM_GONE, AlertWatcher, describe


def _alert(state: str, **labels: str) -> dict[str, object]:
    return {"labels": {"alertname": "CtrMeanDown", "model": "ctr", "severity": "high", **labels}, "state": state}


def _am(**labels: str) -> list[dict[str, object]]:
    labels = {"alertname": "CtrMeanDown", "model": "ctr", "severity": "high", **labels}
    return [{"labels": labels, "status": {"state": "active"}}]


def test_each_transition_is_one_line_and_repeats_are_silent() -> None:
    lines: list[str] = []
    now = [0.0]
    w = AlertWatcher("http://s", "http://am", out=lines.append, clock=lambda: now[0])
    w.observe([_alert("pending", version="all")], [])
    now[0] = 20
    w.observe([_alert("firing", version="all")], [])
    w.observe([_alert("firing", version="all")], [])  # nothing new
    now[0] = 22
    w.observe([_alert("firing", version="all")], _am(version="all"))
    w.observe([_alert("firing", version="all")], _am(version="all"))  # active once
    now[0] = 150
    w.observe([_alert("inactive", version="all")], [])
    assert [ln.split("]", 1)[1].split()[0] for ln in lines] == ["PENDING", "FIRING", "active", "RESOLVED", "gone"]
    assert lines[1].startswith("  [+0:20]") and lines[-1].startswith("  [+2:30]")
    assert all("CtrMeanDown ctr all versions" in ln for ln in lines)
    [key] = w.labels
    assert w.sidecar_seen[key] == [(0.0, "PENDING"), (20.0, "FIRING"), (150.0, "RESOLVED")]
    assert w.am_seen[key] == [(22.0, AM_ACTIVE), (150.0, AM_GONE)]


def test_a_resolved_alert_seen_first_is_not_announced() -> None:
    lines: list[str] = []
    AlertWatcher("http://s", None, out=lines.append).observe([_alert("inactive", version="2")], None)
    assert lines == []


def test_describe_never_prints_vunversioned() -> None:
    assert describe({"alertname": "X", "model": "m", "version": "unversioned"}) == "X m all versions"
    assert describe({"alertname": "X", "model": "m", "version": "2", "feature": "f"}) == "X m v2 f"


def test_an_action_alert_prints_its_plan_once_under_its_firing_line() -> None:
    lines: list[str] = []
    w = AlertWatcher("http://s", None, out=lines.append, clock=lambda: 0.0)
    summary = "[INFO] [dry run] would revert fraud: POST /v2/repository/models/fraud/load with config ..."
    alert = {
        "labels": {"alertname": "ActionPlanned", "model": "fraud", "action": "revert", "action_id": "act-1"},
        "state": "firing",
        "annotations": {"summary": summary},
    }
    w.observe([alert], None)
    w.observe([alert], None)
    w.observe([_alert("firing", version="all")], None)  # not an action: no plan line
    assert [ln.split("]", 1)[1].split()[0] for ln in lines] == ["FIRING", ACTION, "FIRING"]
    assert lines[1].endswith(summary)
