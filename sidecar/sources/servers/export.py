"""The serving SLIs of every configured server as Prometheus series (one custom collector per registry).

Labels are bounded: ``server`` (the configured names), ``model`` and ``version`` (at most ``max_models`` per
server), ``outcome`` (a closed set), ``stat`` (avg, p50, p95, p99). Names are the schema's with dots as
underscores, under ``sidecar_serving_``: ``sidecar_serving_gen_ai_server_time_to_first_token_seconds{stat="p95"}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sidecar.sources.servers.derive import ServingDeriver
from sidecar.sources.servers.schema import Counter, DistName, Gauge

__all__ = ["ServingExport", "prom_name"]

_P = "sidecar_serving_"
_LABELS = ["server", "model", "version"]
_UNITLESS = {DistName.BATCH_SIZE, DistName.INPUT_TOKENS_PER_REQUEST, DistName.OUTPUT_TOKENS_PER_REQUEST}


def prom_name(sli: str) -> str:
    return sli.replace(".", "_")


class ServingExport(Collector):
    """Sources add themselves with ``add(server, deriver, before_collect)``; ``collect`` reads them all."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._servers: dict[str, tuple[ServingDeriver, Callable[[], None]]] = {}
        registry.register(self)

    def add(self, server: str, deriver: ServingDeriver, before_collect: Callable[[], None]) -> None:
        self._servers[server] = (deriver, before_collect)

    def describe(self) -> list[Metric]:
        return []  # series come and go with models; describing nothing keeps registration from collecting

    def collect(self) -> Iterator[Metric]:
        req_total = CounterMetricFamily(
            _P + "requests", "Finished requests by outcome (reset-corrected).", labels=[*_LABELS, "outcome"]
        )
        req_rate = GaugeMetricFamily(
            _P + "requests_per_second",
            "Finished requests per second over the last scrape interval.",
            labels=[*_LABELS, "outcome"],
        )
        err = GaugeMetricFamily(
            _P + "error_ratio",
            "Failed / finished requests (aborted ones excluded) over the last interval.",
            labels=_LABELS,
        )
        totals = {c: CounterMetricFamily(_P + prom_name(c), f"{c} (reset-corrected).", labels=_LABELS) for c in Counter}
        rates = {
            c: GaugeMetricFamily(_P + prom_name(c) + "_per_second", f"{c} per second.", labels=_LABELS) for c in Counter
        }
        gauges = {
            g: GaugeMetricFamily(_P + prom_name(g), f"{g} as the server reports it.", labels=_LABELS) for g in Gauge
        }
        dists = {
            d: GaugeMetricFamily(
                _P + prom_name(d) + ("" if d in _UNITLESS else "_seconds"),
                f"{d} over the last interval: average and quantiles from the server's buckets.",
                labels=[*_LABELS, "stat"],
            )
            for d in DistName
        }
        for server, (deriver, before) in sorted(self._servers.items()):
            before()
            for (model, version), tot in sorted(deriver.totals_items()):
                base = [server, model, version]
                for name, v in tot.items():
                    kind, _, sli = name.partition(":")
                    if kind == "requests":
                        req_total.add_metric([*base, sli], v)
                    elif kind == "counter" and sli in totals:
                        totals[Counter(sli)].add_metric(base, v)
            if deriver.fresh:  # gauges are known from the first good scrape on
                for (model, version), m in sorted(deriver.current.items()):
                    for g, v in m.gauges.items():
                        gauges[Gauge(g)].add_metric([server, model, version], v)
            for (model, version), d in sorted(deriver.derived.items()):
                base = [server, model, version]
                for name, v in d.rates.items():
                    kind, _, sli = name.partition(":")
                    if kind == "requests":
                        req_rate.add_metric([*base, sli], v)
                    elif name in rates:
                        rates[Counter(name)].add_metric(base, v)
                if d.error_ratio is not None:
                    err.add_metric(base, d.error_ratio)
                for dn, st in d.stats.items():
                    for stat, v in st.items():
                        dists[DistName(dn)].add_metric([*base, stat], v)
        yield req_total
        yield req_rate
        yield err
        yield from totals.values()
        yield from rates.values()
        yield from gauges.values()
        yield from dists.values()
