"""The line of model probes and actions on ``/``: each probed model's last result and the actions layer's mode,
read from their metrics (so the page needs no handle on them). The plans and actions themselves are alerts
(ActionPlanned, ActionTaken, ActionFailed), listed with the others."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

__all__ = ["probe_line"]

_FAMILIES = {
    "sidecar_probe_success",
    "sidecar_probe_consecutive_failures",
    "sidecar_actions_paused",
    "sidecar_actions_dry_run",
}
_MAX_MODELS = 20  # bounded: /metrics lists every model


def probe_line(registry: CollectorRegistry) -> str | None:
    """None when neither probes nor actions are configured."""
    ok: dict[str, bool] = {}
    failing: dict[str, int] = {}
    actions: list[str] = []
    seen = probed = False
    for family in registry.collect():
        if family.name not in _FAMILIES:
            continue
        seen = True
        probed = probed or family.name.startswith("sidecar_probe_")
        for s in family.samples:
            model = s.labels.get("model", "?") + (f" v{s.labels['version']}" if s.labels.get("version") else "")
            if family.name == "sidecar_probe_success":
                ok[model] = s.value == 1
            elif family.name == "sidecar_probe_consecutive_failures":
                failing[model] = int(s.value)
            elif family.name == "sidecar_actions_dry_run":
                actions.append("dry run (plans only)" if s.value == 1 else "acting")
            elif s.value == 1:
                actions.append("paused")
    if not seen:
        return None
    parts = [f"{m} ok" if ok[m] else f"{m} failing ({failing.get(m, 0)} in a row)" for m in sorted(ok)[:_MAX_MODELS]]
    more = len(ok) - _MAX_MODELS
    if more > 0:
        parts.append(f"{more} more on /metrics")
    text = "; ".join(parts) or ("not probed yet" if probed else "")
    if actions:
        text = (text + " | " if text else "") + "actions: " + ", ".join(actions)
    return text
