"""Model servers without LLM figures (MLServer, ...), each on an exposition built from its own source."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sidecar.promtext import parse_exposition
from sidecar.sources.servers import DistName, detect, map_exposition
from sidecar.sources.servers.registry import family_names


def test_mlserver(fixture_text: Callable[[str], str]) -> None:
    expo = parse_exposition(fixture_text("mlserver.prom"), eager_labels=False)
    prof = detect(family_names((n for n, _l, _v in expo.samples), expo.types))
    assert prof is not None and prof.name == "mlserver"
    snap = map_exposition(expo, prof, server="s", taken_at=0.0)
    m = snap.models[("iris", "v1.2")]
    assert dict(m.requests) == {"success": 40, "failure": 2}
    e2e = m.dists[DistName.REQUEST_DURATION]
    assert (e2e.count, e2e.sum) == (42, pytest.approx(1.05))
    assert e2e.buckets == ()  # a summary: average only
