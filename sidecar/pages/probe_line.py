"""The line of model probes and actions on ``/``: each probed model's last result and the actions layer's mode,
read from their metrics (so the page needs no handle on them). The plans and actions themselves are alerts
(ActionPlanned, ActionTaken, ActionFailed), listed with the others. The words are ``render/probe.py``'s."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.probe import line_text

__all__ = ["probe_line"]

_FAMILIES = {
    "sidecar_probe_success",
    "sidecar_probe_consecutive_failures",
    "sidecar_probe_held",
    "sidecar_actions_paused",
    "sidecar_actions_dry_run",
}
_MAX_MODELS = 20  # bounded: /metrics lists every model


def probe_line(registry: CollectorRegistry) -> str | None:
    """None when neither probes nor actions are configured."""
    ok: dict[tuple[str, str], bool] = {}
    failing: dict[tuple[str, str], int] = {}
    held: dict[tuple[str, str], str] = {}  # not probed while a revert holds: the revert's action id
    actions: list[str] = []  # mode tokens: dry_run | acting | paused
    seen = probed = False
    for family in registry.collect():
        if family.name not in _FAMILIES:
            continue
        seen = True
        probed = probed or family.name.startswith("sidecar_probe_")
        for s in family.samples:
            key = (s.labels.get("model", "?"), s.labels.get("version", ""))
            if family.name == "sidecar_probe_success":
                ok[key] = s.value == 1
            elif family.name == "sidecar_probe_consecutive_failures":
                failing[key] = int(s.value)
            elif family.name == "sidecar_probe_held":
                if s.value == 1:
                    held[key] = s.labels.get("action_id", "")
            elif family.name == "sidecar_actions_dry_run":
                actions.append("dry_run" if s.value == 1 else "acting")
            elif s.value == 1:
                actions.append("paused")
    if not seen:
        return None
    return line_text(ok, failing, actions, probed, _MAX_MODELS, held)
