"""One audit event as a row of ``/audit``: what it is about (model and version), its outcome and its details,
for every kind the audit log records (``request``, ``change``, ``finding_crossed`` / ``finding_cleared``,
``alert_fired`` / ``alert_resolved`` / ``alert_resent``, ``alert_delivery_failed`` /
``alert_delivered_after_retry``).

An event is a JSON object a client may have shaped (labels, texts), so every field is read defensively and
shown as text; an unknown kind still shows its labels and summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.alerting.render.kinds import figure
from sidecar.pages.render import ago
from sidecar.pages.waterfall import one_line

__all__ = ["AuditRow", "audit_row", "subject"]

_SOURCES = {"api": "POST /v1/changes", "triton_repository": "Triton repository poll", "config": "config"}
_ALERT = {"alert_fired": "fired", "alert_resolved": "resolved", "alert_resent": "re-sent"}
# Labels shown elsewhere in the row (subject, check) are not repeated among the details.
_SHOWN = frozenset({"model", "version", "alertname", "check", "severity"})
_NUMBERS = (("value", "value"), ("threshold", "threshold"), ("baseline", "baseline"), ("p_value", "p"))


@dataclass(frozen=True)
class AuditRow:
    id: str
    at: float | None
    kind: str
    subject: str  # "ctr · version 2", "ctr", "" (none named)
    outcome: str
    outcome_css: str  # err | ok | maybe | ""
    outcome_note: str  # muted, after the outcome: a code, Triton's own outcome, an HTTP status
    title: str  # the detail's first line: a check, an alert name, a change's text
    text: str  # a summary or reason, one line
    facts: list[tuple[str, str]] = field(default_factory=list)  # (name, value) pairs: labels, numbers
    link: str | None = None  # a change's link (http/https only)
    trace_id: str = ""


def _s(v: object) -> str:
    return "" if v is None else str(v)


def _num(v: object) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return f"{v:.4g}" if math.isfinite(v) else str(v)


def _dict(v: object) -> dict[str, str]:
    return {str(k): _s(x) for k, x in v.items()} if isinstance(v, Mapping) else {}


def subject(model: str, version: str) -> str:
    """``ctr v2`` for a numbered version, ``ctr · version all`` for any other: never ``ctr vall``, read as a
    model's name."""
    if not version:
        return model
    ver = f"v{version}" if version.isdigit() else f"version {version}"
    return f"{model} {ver}" if model and version.isdigit() else f"{model} · {ver}" if model else ver


def _request(e: Mapping[str, Any]) -> tuple[str, str, str, str, str, list[tuple[str, str]]]:
    outcome = _s(e.get("outcome"))
    notes = [_s(e.get("code"))] if e.get("code") else []
    triton = _s(e.get("triton_outcome"))
    if triton and triton != outcome:
        notes.append(f"(Triton: {triton})")
    facts: list[tuple[str, str]] = []
    title = _latency(e.get("client_latency_ms"), e.get("latency_ms"))
    stages = e.get("stages_ms")
    if isinstance(stages, Mapping):
        facts += [(str(k), f"{float(v):.1f} ms") for k, v in stages.items() if _num(v) is not None]
    for k in ("rule", "bucket", "request_id"):
        if e.get(k):
            facts.append((k, _s(e.get(k))))
    if e.get("joined") is False:
        facts.append(("joined", "no (one side only)"))
    css = "ok" if outcome == "ok" else "err" if outcome else ""
    return outcome, css, " ".join(notes), title, one_line(_s(e.get("reason")), 300), facts


def _ms(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and _num(v) is not None else None


def _latency(client: object, triton: object) -> str:
    """The latency as the caller saw it (the trace's duration on /traces, beside the outcome the caller saw),
    and Triton's own where it differs: ``120.0 ms (Triton: 106.0 ms)``; Triton's alone without a caller side."""
    c, t = _ms(client), _ms(triton)
    if c is None:
        return f"{t:.1f} ms" if t is not None else ""
    same = t is None or f"{t:.1f}" == f"{c:.1f}"
    return f"{c:.1f} ms" + ("" if same else f" (Triton: {t:.1f} ms)")


def _finding(kind: str, e: Mapping[str, Any]) -> tuple[str, str, str, str, str, list[tuple[str, str]]]:
    crossed = kind == "finding_crossed"
    labels = _dict(e.get("labels"))
    facts = [(k, v) for k, v in sorted(labels.items()) if k not in _SHOWN and v]
    of = _s(e.get("finding_kind"))
    for key, name in _NUMBERS:
        n = _num(e.get(key))
        if n is not None:
            # value, threshold, baseline in the form the finding's summary writes them (render.kinds.figure).
            facts.append((name, figure(of, float(e[key])) if key != "p_value" and math.isfinite(e[key]) else n))
    outcome = "condition holds" if crossed else "condition cleared"
    return outcome, "err" if crossed else "ok", _s(e.get("severity")), _s(e.get("check")), _s(e.get("summary")), facts


def _alert(kind: str, e: Mapping[str, Any]) -> tuple[str, str, str, str, str, list[tuple[str, str]]]:
    labels = _dict(e.get("labels"))
    ann = _dict(e.get("annotations"))
    facts = [(k, v) for k, v in sorted(labels.items()) if k not in _SHOWN and v]
    note = labels.get("severity", "")
    if kind in _ALERT:
        outcome = _ALERT[kind]
        css = "ok" if outcome == "resolved" else "err"
        if kind == "alert_resent" and _num(e.get("window")) is not None:
            note = f"{note} {_resent_window(e.get('window'), e.get('window_secs'))}".strip()
    elif kind == "alert_delivery_failed":
        outcome, css = "not delivered", "err"
        note = f"HTTP {e['status']}" if e.get("status") is not None else ""
    elif kind == "alert_delivered_after_retry":
        outcome, css = "delivered after retry", "maybe"
        note = ""
    else:
        outcome, css = _s(e.get("state")), ""
    if e.get("state") and kind.startswith("alert_deliver"):
        facts.insert(0, ("notice", _s(e.get("state"))))
    attempts = _num(e.get("attempts"))
    if attempts is not None:
        n = int(e["attempts"])
        tried = f"{n} attempt{'' if n == 1 else 's'}"
        facts.append(("delivery", f"{tried} to {_s(e.get('alertmanager'))}" if e.get("alertmanager") else tried))
    text = ann.get("summary", "")
    if e.get("reason"):
        text = f"{text} — {one_line(_s(e.get('reason')), 300)}" if text else one_line(_s(e.get("reason")), 300)
    return outcome, css, note, labels.get("alertname", ""), text, facts


def audit_row(e: Mapping[str, Any]) -> AuditRow:
    kind = _s(e.get("kind"))
    labels = _dict(e.get("labels"))
    model = _s(e.get("model")) or labels.get("model", "")
    version = _s(e.get("version")) or labels.get("version", "")
    link = None
    if kind == "request":
        parts = _request(e)
    elif kind.startswith("finding_"):
        parts = _finding(kind, e)
    elif kind.startswith("alert_"):
        parts = _alert(kind, e)
    elif kind == "change":
        src = _s(e.get("source"))
        who = _s(e.get("who"))
        parts = ("recorded", "", _SOURCES.get(src, src), _s(e.get("what")), f"by {who}" if who else "", [])
        raw = _s(e.get("link"))
        link = raw if raw.startswith(("http://", "https://")) else None
    else:
        ann = _dict(e.get("annotations"))
        parts = (
            _s(e.get("outcome") or e.get("state")),
            "",
            "",
            labels.get("alertname", ""),
            ann.get("summary", ""),
            [],
        )
    outcome, css, note, title, text, facts = parts
    at = e.get("at")
    return AuditRow(
        id=_s(e.get("id")),
        at=float(at) if isinstance(at, int | float) and not isinstance(at, bool) and math.isfinite(at) else None,
        kind=kind,
        subject=subject(model, version),
        outcome=outcome,
        outcome_css=css,
        outcome_note=note,
        title=title,
        text=text,
        facts=facts,
        link=link,
        trace_id=_s(e.get("trace_id")),
    )


def _resent_window(window: object, secs: object) -> str:
    """Which of its re-send windows an ``alert_resent`` row is the first re-send of, in time since the alert
    became active (``first re-send 0s-60m after it became active``), not the window's bare index."""
    if not isinstance(window, int) or isinstance(secs, bool) or not isinstance(secs, int | float) or secs <= 0:
        return f"window {window}"
    return f"first re-send {ago(window * secs)}-{ago((window + 1) * secs)} after it became active"
