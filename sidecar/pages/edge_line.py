"""The line of edge findings on ``/``: the hit ratio of each route group held to the SLA against its target and
projection, and which edge checks fire now, read from the edge checks' gauges (so the page needs no handle on
them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.text import pct

__all__ = ["edge_line"]

_FAMILIES = {
    "sidecar_edge_hit_ratio_period",
    "sidecar_edge_hit_ratio_target",
    "sidecar_edge_hit_ratio_projected",
    "sidecar_edge_hit_ratio_condition",
    "sidecar_edge_tail_condition",
    "sidecar_edge_purge_condition",
}
_MAX_PARTS = 12  # bounded: the alerts page lists everything


def edge_line(registry: CollectorRegistry) -> str | None:
    """None when no edge check runs; otherwise e.g. ``all 91.4% this period (SLA 92%, projected 91.2%), burning
    its SLA; p99.9 tail firing: all edge; purge did not take: /model/weights/v1.3.``."""
    seen = False
    ratio: dict[str, float] = {}
    target: dict[str, float] = {}
    projected: dict[str, float] = {}
    firing: list[str] = []
    for family in registry.collect():
        if family.name not in _FAMILIES:
            continue
        seen = True
        for s in family.samples:
            lab = s.labels
            g = lab.get("route_group", "")
            if family.name == "sidecar_edge_hit_ratio_period":
                ratio[g] = s.value
            elif family.name == "sidecar_edge_hit_ratio_target":
                target[g] = s.value
            elif family.name == "sidecar_edge_hit_ratio_projected":
                projected[g] = s.value
            elif s.value == 1 and family.name == "sidecar_edge_hit_ratio_condition":
                what = "burning its SLA" if lab.get("check") == "edge_hit_ratio_burn" else "missed the last period"
                firing.append(f"{g} {what}")
            elif s.value == 1 and family.name == "sidecar_edge_tail_condition":
                firing.append(f"p99.9 tail firing: {g} {lab.get('hop', '')}")
            elif s.value == 1 and family.name == "sidecar_edge_purge_condition":
                what = "did not take" if lab.get("check") == "edge_purge_not_taken" else "matched no path"
                firing.append(f"purge {what}: {lab.get('pattern', '')}")
    if not seen:
        return None
    parts = []
    for g in sorted(ratio):
        sla = f"SLA {pct(target[g])}" if g in target else "no SLA"
        proj = f", projected {pct(projected[g])}" if g in projected else ""
        parts.append(f"{g} {pct(ratio[g])} this period ({sla}{proj})")
    parts = parts[:_MAX_PARTS] + sorted(firing)[:_MAX_PARTS]
    return "; ".join(parts) or "no edge traffic yet"
