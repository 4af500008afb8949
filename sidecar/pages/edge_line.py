"""The line of edge findings on ``/``: the hit ratio of each route group held to the SLA against its target and
projection, and which edge checks fire now, read from the edge checks' gauges (so the page needs no handle on
them); the words are ``render/edge.py``'s."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.edge import line_text

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
    """None when no edge check runs; otherwise ``render.edge.line_text``'s line."""
    seen = False
    ratio: dict[str, float] = {}
    target: dict[str, float] = {}
    projected: dict[str, float] = {}
    firing: list[tuple[str, str, str]] = []  # (what, route group or pattern, check or hop)
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
                firing.append(("sla", g, lab.get("check", "")))
            elif s.value == 1 and family.name == "sidecar_edge_tail_condition":
                firing.append(("tail", g, lab.get("hop", "")))
            elif s.value == 1 and family.name == "sidecar_edge_purge_condition":
                firing.append(("purge", lab.get("pattern", ""), lab.get("check", "")))
    if not seen:
        return None
    return line_text(ratio, target, projected, firing, _MAX_PARTS)
