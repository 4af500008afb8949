"""Which module writes the text of which finding kind (one line per kind)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import sidecar.alerting.render.action as action
import sidecar.alerting.render.batching as batching
import sidecar.alerting.render.business as business
import sidecar.alerting.render.canary as canary
import sidecar.alerting.render.cold_start as cold_start
import sidecar.alerting.render.diagnosis as diagnosis
import sidecar.alerting.render.drift as drift
import sidecar.alerting.render.edge as edge
import sidecar.alerting.render.goodput as goodput
import sidecar.alerting.render.output_sanity as output_sanity
import sidecar.alerting.render.probe as probe
import sidecar.alerting.render.tokens as tokens
from sidecar.alerting.render.text import pct
from sidecar.model import Finding

RENDERERS: Mapping[str, Callable[[Finding], tuple[str, str]]] = MappingProxyType(
    {
        "action": action.render,
        "advice": batching.render,
        "business": business.render,
        "canary": canary.render,
        "cold_start": cold_start.render,
        "diagnosis": diagnosis.render,
        "drift": drift.render,
        "edge_purge": edge.render_purge,
        "edge_sla": edge.render_sla,
        "edge_tail": edge.render_tail,
        "goodput": goodput.render,
        "output_sanity": output_sanity.render,
        "probe": probe.render,
        "token_drift": tokens.render,
    }
)

# Kinds whose ``value`` and ``threshold`` are shares (0..1): their summaries write them as percentages, so every
# other screen that shows the bare numbers (the audit trail's rows) writes them so too, never 0.912 beside 91.2%.
RATIO_KINDS = frozenset({"edge_sla", "goodput", "output_sanity"})


def figure(kind: str, value: float) -> str:
    """A finding's ``value`` or ``threshold`` as a screen shows it beside the finding's words."""
    return pct(value) if kind in RATIO_KINDS else f"{value:.4g}"
