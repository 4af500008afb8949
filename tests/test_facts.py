"""Facts are typed and frozen, and read as a mapping too (templates, JSON bodies, older readers)."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from sidecar.facts import NO_FACTS, CanaryFacts, DriftBlock, DriftFacts, DriftReference
from sidecar.model import Finding


def _drift() -> DriftFacts:
    b = DriftBlock(0.0, 60.0, 400, 1000, 0.41, 0.41, 1e-30, 2e-30, 0.002, True)
    return DriftFacts(
        test="ks",
        decision="multiscale",
        floor=0.05,
        condition=True,
        now=b,
        evidence=(b,),
        reference=DriftReference("pinned:2@1", 1000, "pinned:2", 1.0),
        extra={"min_samples": 200},
    )


def test_facts_are_frozen() -> None:
    f = _drift()
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.q = 0.5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.evidence[0].q = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        f.extra["min_samples"] = 1  # type: ignore[index]


def test_facts_read_as_a_mapping_of_their_fields_and_extra() -> None:
    f = _drift()
    assert f["test"] == "ks" and f.get("q") is None and f.get("min_samples") == 200 and f.get("nope", 7) == 7
    assert "floor" in f and "min_samples" in f and "nope" not in f and "extra" not in f
    assert len(f) == len(list(f)) == len(dict(f))
    with pytest.raises(KeyError):
        f["nope"]
    c = CanaryFacts("worse", "p50", "events", 200, 0.01, 3, "CanaryVersionWorse.md", extra={"p50.diff": 0.2})
    assert dict(c)["p50.diff"] == 0.2 and c["worse"] == "p50"


def test_facts_go_into_a_json_body_whole() -> None:
    body = orjson.loads(orjson.dumps(dict(_drift())))
    assert body["evidence"][0]["q"] == 2e-30 and body["reference"]["id"] == "pinned:2@1"
    assert body["min_samples"] == 200 and "extra" not in body


def test_a_finding_without_facts_has_empty_ones() -> None:
    f = Finding(check="c", kind="business", labels={}, active=False, value=None)
    assert f.facts is NO_FACTS and not f.facts and dict(f.facts) == {}
