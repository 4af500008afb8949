"""The line of goodput on ``/``: each (model, version)'s good share over the first burn pair's long window
against the objective, and which burn, read from the goodput check's gauges (the page needs no handle on it)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from sidecar.alerting.render.text import pct
from sidecar.naming import human_secs

__all__ = ["goodput_line"]

_FAMILIES = {"sidecar_goodput_ratio", "sidecar_goodput_objective", "sidecar_goodput_condition"}
# A server's per-request latency histograms (servers:): goodput from them is only a bound from bucket edges.
_HISTOGRAMS = {
    "sidecar_serving_gen_ai_server_time_to_first_token_seconds",
    "sidecar_serving_gen_ai_server_time_per_output_token_seconds",
}
_MAX_PARTS = 12  # bounded: the alerts page lists everything


def goodput_line(registry: CollectorRegistry) -> str | None:
    """None when the goodput check does not run; otherwise e.g. ``objective 99%; chat v3 97.1% over 1h, burning
    its budget; rank v1 99.8% over 1h``."""
    seen = False
    objective: float | None = None
    ratio: dict[tuple[str, str], dict[float, float]] = {}  # (model, version) -> {window: ratio}
    burning: set[tuple[str, str]] = set()
    histogram_only: set[tuple[str, str]] = set()  # (server, model) with latency histograms
    for family in registry.collect():
        if family.name in _HISTOGRAMS:
            histogram_only.update((s.labels.get("server", ""), s.labels.get("model", "")) for s in family.samples)
            continue
        if family.name not in _FAMILIES:
            continue
        seen = True
        for s in family.samples:
            key = (s.labels.get("model", ""), s.labels.get("version", ""))
            if family.name == "sidecar_goodput_objective":
                objective = s.value
            elif family.name == "sidecar_goodput_condition" and s.value == 1:
                burning.add(key)
            elif family.name == "sidecar_goodput_ratio":
                ratio.setdefault(key, {})[float(s.labels.get("window_secs", "0"))] = s.value
    if not seen:
        return None
    parts = [f"objective {pct(objective)}"] if objective is not None else []
    for key in sorted(ratio, key=lambda k: (k not in burning, k))[:_MAX_PARTS]:
        by_window = ratio[key]
        if key in burning:
            # Every window, shortest first: the burning alert quotes its pair's long window, and `/` must show
            # that same figure (not only the longest window's, which a fresh burn has not reached yet).
            figures = ", ".join(f"{pct(by_window[w])} over {human_secs(w)}" for w in sorted(by_window)[:4])
            parts.append(f"{key[0]} v{key[1]} burning its budget: {figures}")
        else:
            longest = max(by_window)
            parts.append(f"{key[0]} v{key[1]} {pct(by_window[longest])} over {human_secs(longest)}")
    if len(parts) <= 1:
        parts.append("no judged requests yet")
    judged = {model for model, _v in ratio}
    for server, model in sorted(histogram_only)[:_MAX_PARTS]:
        if model not in judged:  # no per-request figures for it: only the server's histograms
            parts.append(
                f"{model} on {server}: histograms only, so its goodput is a bound from bucket edges, not a figure "
                "(docs/servers.md, Goodput)"
            )
    return "; ".join(parts)
