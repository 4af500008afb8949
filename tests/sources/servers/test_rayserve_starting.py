"""Ray Serve while it starts (tests/data/servers/rayserve-starting-real.prom, captured from a real 2.60.0): the
replica's families are not exported yet, only the controller's and the router's. A fresh-clone CI run's first scrape
of this window (129 families) matched no profile; the router's waiting gauge identifies Ray Serve."""

from __future__ import annotations

from collections.abc import Callable

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import Gauge, detect, map_exposition
from sidecar.sources.servers.rayserve import PROFILE
from sidecar.sources.servers.registry import family_names


def test_ray_serve_before_its_replica_reports_is_read_with_its_router_queue(
    fixture_text: Callable[[str], str],
) -> None:
    expo = parse_exposition(fixture_text("rayserve-starting-real.prom"), eager_labels=False)
    present = family_names((n for n, _l, _v in expo.samples), expo.types)
    # What the CI failure saw: none of the replica's families.
    assert PROFILE.families & present == {"ray_serve_deployment_queued_queries"}
    prof = detect(present)
    assert prof is PROFILE
    snap = map_exposition(expo, prof, server="s", taken_at=0.0)
    assert snap.refused == ()
    assert list(snap.models) == [("Iris", "")]
    m = snap.models[("Iris", "")]
    assert m.gauges == {Gauge.WAITING: 0}
    assert dict(m.requests) == {}
