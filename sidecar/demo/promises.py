"""The promise table the demo prints when it stops: each alert the banner promised, and what happened.

"What happened" is what the watcher printed along the way, which is what the sidecar's ``GET /v1/alerts`` and
Alertmanager's ``GET /api/v2/alerts`` answered; nothing is computed from the scenario itself. Each promise gets a
verdict: ``kept``, ``not yet`` (the demo stopped before the promised time), ``late`` or ``broken``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.demo.story import DemoAlert, clock_text
from sidecar.demo.watch import AlertWatcher

__all__ = ["Outcome", "judge", "promise_table"]

_FIRING, _RESOLVED = "FIRING", "RESOLVED"


@dataclass(frozen=True)
class Outcome:
    promise: DemoAlert
    verdict: str  # kept | not yet | late | broken
    detail: str  # why, when not kept
    sidecar: str  # per version: "v1 FIRING +4:40, RESOLVED +9:20"
    alertmanager: str  # per version: "v1 active +4:42, gone +9:22"


def _version(labels: dict[str, str]) -> str:
    v = labels.get("version", "")
    return "all versions" if v in ("", "all", "unversioned") else f"v{v}"


def _matches(p: DemoAlert, labels: dict[str, str]) -> bool:
    # The alert name too: the actions layer raises ActionPlanned, ActionTaken and ActionFailed from one check.
    return (
        labels.get("check") == p.check
        and labels.get("model") == p.model
        and labels.get("feature") == p.feature
        and labels.get("alertname", p.alertname) == p.alertname
    )


def _history(seen: list[tuple[float, str]], keep: Sequence[str] | None = None) -> str:
    words = (what.replace(" in Alertmanager", "").replace(" from Alertmanager", "") for _, what in seen)
    return ", ".join(
        f"{w} {clock_text(t)}" for (t, what), w in zip(seen, words, strict=True) if not keep or what in keep
    )


def judge(p: DemoAlert, w: AlertWatcher, ended_secs: float) -> Outcome:
    keys = sorted((k for k, lab in w.labels.items() if _matches(p, lab)), key=lambda k: _version(w.labels[k]))
    by_version = {k: w.sidecar_seen.get(k, []) for k in keys}
    shown = [(k, _history(s, (_FIRING, _RESOLVED))) for k, s in by_version.items()]
    sidecar = "; ".join(f"{_version(w.labels[k])} {h}" for k, h in shown if h) or "never fired"
    am = "; ".join(f"{_version(w.labels[k])} {_history(w.am_seen[k])}" for k in keys if w.am_seen.get(k))
    if w.alertmanager_url is None:
        am = "no Alertmanager"
    fired = [t for s in by_version.values() for t, what in s if what == _FIRING]
    deadline = p.step_secs + p.fires_within_secs
    if not fired:
        if ended_secs < deadline:
            return Outcome(p, "not yet", f"the demo stopped at {clock_text(ended_secs)}", sidecar, am or "-")
        return Outcome(p, "broken", f"not firing by {clock_text(deadline)}", sidecar, am or "-")
    verdict, detail = "kept", ""
    if min(fired) > deadline:
        verdict, detail = "late", f"first fired {clock_text(min(fired))}, promised by {clock_text(deadline)}"
    last = {
        k: next((what for _, what in reversed(s) if what in (_FIRING, _RESOLVED)), None) for k, s in by_version.items()
    }
    if p.end_step_secs is not None and p.resolves_within_secs is not None:
        by = p.end_step_secs + p.resolves_within_secs
        still = [k for k, s in last.items() if s == _FIRING]
        resolved = [t for s in by_version.values() for t, what in s if what == _RESOLVED]
        if still and ended_secs < by:
            verdict, detail = "not yet", f"still firing when the demo stopped at {clock_text(ended_secs)}"
        elif still:
            verdict, detail = "broken", f"still firing after {clock_text(by)}"
        elif resolved and max(resolved) > by:
            verdict, detail = "late", f"resolved {clock_text(max(resolved))}, promised by {clock_text(by)}"
    elif not p.may_flap and any(s == _RESOLVED for s in last.values()):
        verdict, detail = "broken", "resolved, though the banner said it stays firing"
    if am == "" and verdict == "kept" and w.alertmanager_url is not None:
        verdict, detail = "broken", "firing in the sidecar but never active in Alertmanager"
    return Outcome(p, verdict, detail, sidecar, am or "-")


def promise_table(promises: Sequence[DemoAlert], w: AlertWatcher, ended_secs: float) -> list[str]:
    """The lines printed at the end of the demo."""
    out = [
        f"What the banner promised, and what happened (the demo ran {clock_text(ended_secs)}; the sidecar's "
        "/v1/alerts and Alertmanager's /api/v2/alerts as the watcher saw them):"
    ]
    for o in (judge(p, w, ended_secs) for p in promises):
        out.append(f"  [{o.verdict}] {o.promise.promise()}" + (f" ({o.detail})" if o.detail else ""))
        out.append(f"      sidecar       {o.sidecar}")
        out.append(f"      Alertmanager  {o.alertmanager}")
    return out
