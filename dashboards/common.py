"""Shared pieces of every dashboard: the datasource and label variables, Prometheus targets with exemplars,
panels with units, thresholds and descriptions, and a layout that places panels on Grafana's 24-column grid.

Every panel carries ``needs``: what has to be running for its queries to return data. The live panel test
(tests/ops/test_ops_live_panels.py) requires data from every panel whose ``needs`` it can produce on a CPU-only
machine and checks the others for valid PromQL; docs/dashboards.md lists them from the same field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grafanalib.core import (
    Annotations,
    Dashboard,
    GridPos,
    RowPanel,
    Stat,
    Template,
    Templating,
    Time,
    TimeSeries,
)

__all__ = [
    "DS",
    "NEEDS",
    "Board",
    "PanelInfo",
    "PromTarget",
    "datasource_var",
    "label_var",
    "steps",
]

# The datasource is a variable so one JSON works against any Prometheus the operator picks.
DS: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}

# What a panel's data depends on (see the module docstring).
NEEDS: dict[str, str] = {
    "triton": "a sidecar scraping a real Triton that serves traffic (CPU is enough)",
    "failures": "failed inferences (the demo's fraud model fails on negative amounts)",
    "traces": "Triton sending OTLP spans to the sidecar (--trace-config mode=opentelemetry)",
    "self": "a running sidecar (its own series always exist)",
    "refusals": "a push request refused by the sidecar (oversized body, overload, bad token)",
    "checks": "at least one check (drift or business) configured",
    "errors": "a bus subscriber or a check raising (a bug: the test cannot make one happen on purpose)",
    "drift": "the drift check configured and fed with events",
    "fleet": "sidecars with checks.fleet exporting bins, and alerts/fleet.rules.yml evaluated by the Prometheus",
    "business": "a business check configured and fed with events",
    "alerting": "the sidecar's alert book sending to an Alertmanager",
    "changes": "a change recorded (POST /v1/changes or a new model version in Triton's repository index)",
    "gpu": "an NVIDIA GPU visible to NVML or a dcgm-exporter scrape",
    "dcgm": "a dcgm-exporter scrape (DCGM profiling fields; NVML does not give them)",
    "cache": "Triton's response cache enabled for a model (--cache-config and response_cache in config.pbtxt)",
    "edge": "edge access-log lines read by the sidecar (edge.enabled, a tailed log or POST /v1/edge)",
    "llm": "an LLM server scraped through its profile (servers:), and by Prometheus itself for its histograms",
    "goodput": "the goodput check fed with events carrying ttft_ms, inter_token_ms, tokens_out, latency_ms",
    "process": "prometheus_client's ProcessCollector registered on the sidecar's registry (not done yet)",
}


@dataclass(frozen=True)
class PromTarget:
    """A Prometheus query as Grafana's Prometheus editor stores it, with the ``exemplar`` switch (grafanalib's
    ``Target`` has none) and the datasource variable."""

    expr: str
    legendFormat: str  # camelCase: Grafana's JSON keys
    refId: str
    exemplar: bool = False
    instant: bool = False

    def to_json_data(self) -> dict[str, Any]:
        return {
            "datasource": DS,
            "expr": self.expr,
            "legendFormat": self.legendFormat,
            "refId": self.refId,
            "exemplar": self.exemplar,
            "instant": self.instant,
            "range": not self.instant,
            "format": "time_series",
            "interval": "",
            "hide": False,
        }


def datasource_var() -> Template:
    return Template(name="datasource", label="Data source", query="prometheus", type="datasource", default="Prometheus")


def label_var(name: str, metric: str, *, label: str, depends: str = "") -> Template:
    """A multi-value variable over the values of one label (``All`` matches any value, including none)."""
    selector = f"{metric}{{{depends}}}" if depends else metric
    t = Template(
        name=name,
        label=label,
        query=f"label_values({selector}, {name})",
        dataSource=DS,
        includeAll=True,
        multi=True,
        allValue=".*",
        default="All",
        refresh=2,
    )
    # Grafana stores a multi-value "All" selection as the list ["$__all"], not as the text "All".
    t._current = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return t


def steps(*pairs: tuple[str, float | None]) -> list[dict[str, Any]]:
    """Threshold steps for Grafana's field config: the first colour applies from -infinity."""
    return [{"color": c, "value": v} for c, v in pairs]


GREEN_ONLY = steps(("green", None))


@dataclass(frozen=True)
class PanelInfo:
    dashboard: str
    title: str
    needs: str
    exprs: tuple[str, ...]
    unit: str


@dataclass
class Board:
    """Builds one dashboard: panels are placed left to right, rows start a new line."""

    uid: str
    title: str
    description: str
    tags: list[str]
    variables: list[Template] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    panels: list[Any] = field(default_factory=list)
    infos: list[PanelInfo] = field(default_factory=list)
    _x: int = 0
    _y: int = 0
    _h: int = 0
    _next_id: int = 1

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=self._y), id=self._take_id()))
        self._y += 1

    def _newline(self) -> None:
        if self._x:
            self._y += self._h
            self._x, self._h = 0, 0

    def _take_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i

    def _place(self, w: int, h: int) -> GridPos:
        if self._x + w > 24:
            self._newline()
        pos = GridPos(h=h, w=w, x=self._x, y=self._y)
        self._x += w
        self._h = max(self._h, h)
        return pos

    def _targets(self, queries: list[tuple[str, str]], exemplar: bool, instant: bool) -> list[PromTarget]:
        return [
            PromTarget(expr=q, legendFormat=legend, refId=chr(ord("A") + i), exemplar=exemplar, instant=instant)
            for i, (q, legend) in enumerate(queries)
        ]

    def _record(self, title: str, description: str, needs: str, queries: list[tuple[str, str]], unit: str) -> None:
        if needs not in NEEDS:
            raise ValueError(f"panel {title!r}: unknown needs {needs!r}")
        if not description:
            raise ValueError(f"panel {title!r}: every panel needs a description")
        self.infos.append(PanelInfo(self.title, title, needs, tuple(q for q, _ in queries), unit))

    def timeseries(
        self,
        title: str,
        description: str,
        queries: list[tuple[str, str]],
        *,
        unit: str,
        needs: str,
        thresholds: list[dict[str, Any]] | None = None,
        w: int = 12,
        h: int = 8,
        exemplar: bool = False,
        stack: bool = False,
        min0: bool = True,
        max1: bool = False,
    ) -> None:
        self._record(title, description, needs, queries, unit)
        self.panels.append(
            TimeSeries(
                title=title,
                description=description,
                dataSource=DS,
                targets=self._targets(queries, exemplar, False),
                gridPos=self._place(w, h),
                id=self._take_id(),
                unit=unit,
                thresholds=thresholds or GREEN_ONLY,
                thresholdsStyleMode="line" if thresholds else "off",
                valueMin=0 if min0 else None,
                valueMax=1 if max1 else None,
                stacking={"mode": "normal", "group": "A"} if stack else {},
                legendDisplayMode="table",
                legendCalcs=["mean", "max", "lastNotNull"],
                tooltipMode="multi",
            )
        )

    def stat(
        self,
        title: str,
        description: str,
        queries: list[tuple[str, str]],
        *,
        unit: str,
        needs: str,
        thresholds: list[dict[str, Any]] | None = None,
        w: int = 6,
        h: int = 4,
    ) -> None:
        self._record(title, description, needs, queries, unit)
        self.panels.append(
            Stat(
                title=title,
                description=description,
                dataSource=DS,
                targets=self._targets(queries, False, True),
                gridPos=self._place(w, h),
                id=self._take_id(),
                format=unit,
                reduceCalc="lastNotNull",
                thresholds=thresholds or GREEN_ONLY,
                colorMode="background",
                graphMode="none",
            )
        )

    def build(self) -> Dashboard:
        return Dashboard(
            title=self.title,
            uid=self.uid,
            description=self.description,
            tags=self.tags,
            panels=self.panels,
            templating=Templating(list=self.variables),
            annotations=Annotations(list=self.annotations),
            time=Time("now-1h", "now"),
            refresh="30s",
            timezone="browser",
            editable=True,
        ).auto_panel_ids()
