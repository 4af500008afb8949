"""Properties of the events parser over generated input (hypothesis): whatever the document, a batch is split
into accepted events and rejections naming their index, nothing raises but the documented refusal, and every
accepted event holds only values the checks can use."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.sources.events.config import EventsConfig
from sidecar.sources.events.http import EventsEndpoint
from sidecar.sources.events.parse import EventError, parse_event, parse_events, plain_event
from sidecar.timerange import renderable

NOW = 1_700_000_000.0
CFG = EventsConfig()
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
    max_leaves=12,
)
KEYS = [
    "model",
    "version",
    "timestamp",
    "features",
    "score",
    "prediction_class",
    "label",
    "trace_id",
    "request_id",
    "user_id",
    "fields",
]
times = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(min_value=NOW - 40 * 86400, max_value=NOW + 600)
    | st.datetimes().map(lambda d: d.isoformat())
    | st.text(max_size=30)
)
# Mostly event-shaped documents, so generation reaches the checks behind the first field.
event_like = st.fixed_dictionaries(
    {"model": st.text(min_size=0, max_size=140) | json_values},
    optional={
        "version": st.integers() | st.text(max_size=140) | json_values,
        "timestamp": times,
        "features": st.dictionaries(st.text(max_size=140), json_scalars, max_size=6) | json_values,
        "score": json_scalars,
        "label": json_scalars,
        "trace_id": st.text(max_size=40),
        "fields": st.dictionaries(st.text(max_size=20), json_scalars, max_size=4),
        **{k: json_values for k in ("prediction_class", "request_id", "user_id", "featurez")},
    },
)


def _dumps(v: object) -> bytes:
    # The standard library writes what orjson will not: NaN, Infinity, integers beyond 64 bits.
    return json.dumps(v).encode()


def _usable(v: object) -> bool:
    return v is None or isinstance(v, str) or (isinstance(v, float) and math.isfinite(v))


@SETTINGS
@given(st.lists(event_like | json_values, max_size=8))
def test_every_document_is_accepted_or_rejected_by_index_and_accepted_ones_are_usable(docs: list[Any]) -> None:
    ok, bad = parse_events(docs, CFG, NOW)
    assert len(ok) + len(bad) == len(docs)
    for r in bad:
        assert r.field.startswith(f"events[{r.index}]") and r.error
    for e in ok:
        assert renderable(e.timestamp) and NOW - CFG.max_age_secs <= e.timestamp <= NOW + CFG.max_future_skew_secs
        assert 0 < len(e.model) <= CFG.max_name_length and len(e.features) <= CFG.max_features_per_event
        assert all(_usable(v) and len(k) <= CFG.max_name_length for k, v in e.features.items())
        assert all(math.isfinite(v) for v in e.fields.values())
        assert e.score is None or math.isfinite(e.score)


@SETTINGS
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "model": st.text(min_size=1, max_size=128),
                "timestamp": st.floats(min_value=NOW - 86400, max_value=NOW + 60),
                "features": st.dictionaries(
                    st.text(min_size=1, max_size=128),
                    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=256) | st.none(),
                    max_size=8,
                ),
                "score": st.floats(allow_nan=False, allow_infinity=False),
            }
        ),
        max_size=5,
    )
)
def test_a_valid_event_is_accepted_with_its_values(docs: list[dict[str, Any]]) -> None:
    ok, bad = parse_events(docs, CFG, NOW)
    assert bad == []
    for doc, e in zip(docs, ok, strict=True):
        assert (e.model, e.timestamp, e.score, e.features) == (
            doc["model"],
            doc["timestamp"],
            doc["score"],
            doc["features"],
        )


@SETTINGS
@given(
    st.binary(max_size=300) | st.lists(json_values, max_size=4).map(_dumps),
    st.sampled_from(["application/json", "application/x-ndjson", "application/json-seq"]),
)
def test_decoding_any_body_refuses_only_with_a_message(body: bytes, mtype: str) -> None:
    endpoint = EventsEndpoint.__new__(EventsEndpoint)
    endpoint.cfg = CFG
    try:
        docs = endpoint._decode(body, mtype)
    except ValueError as exc:
        assert str(exc)
        return
    assert isinstance(docs, list)
    parse_events(docs, CFG, NOW)  # and whatever decoded goes through the parser without raising


# Documents of the usual shape, where the common-shape path takes most of them and must give what the field by
# field path gives; near the edges of every bound (names, strings, times, trace ids, big integers, NaN).
_edge_numbers = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.sampled_from([2**53, 2**53 + 1, -(2**53), 1e308, -1e308])
)
usual_shape = st.fixed_dictionaries(
    {"model": st.text(min_size=0, max_size=130)},
    optional={
        "version": st.text(max_size=130) | st.integers() | st.none(),
        "timestamp": times | st.none() | st.sampled_from([NOW + 300, NOW - 30 * 86400, int(NOW)]),
        "features": st.dictionaries(
            st.text(max_size=130), _edge_numbers | st.text(max_size=258) | st.none() | st.booleans(), max_size=6
        ),
        "score": _edge_numbers | st.none() | st.booleans(),
        "label": _edge_numbers | st.text(max_size=258) | st.none(),
        "prediction_class": st.text(max_size=258) | st.none() | st.integers(),
        "request_id": st.text(max_size=258) | st.none(),
        "user_id": st.text(max_size=258) | st.none(),
        "trace_id": st.text(alphabet="0123456789abcdefABCDEFİg", min_size=30, max_size=34) | st.none(),
        "fields": st.dictionaries(st.text(max_size=130), _edge_numbers, max_size=4),
    },
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(usual_shape | event_like, st.sampled_from([CFG, EventsConfig(max_string_length=20, max_name_length=5)]))
def test_the_common_shape_path_gives_what_the_field_by_field_path_gives(doc: dict[str, Any], cfg: EventsConfig) -> None:
    fast = plain_event(doc, cfg, NOW)
    try:
        slow = parse_event(doc, "events[0]", cfg, NOW)
    except EventError:
        assert fast is None  # a refusal is always said by the field by field path
        return
    assert fast is None or fast == slow


def test_the_common_shape_path_takes_the_usual_event() -> None:
    doc = {
        "model": "ctr",
        "version": "2",
        "timestamp": NOW - 5,
        "features": {"x": 1.5, "n": 3, "c": "de", "m": None},
        "score": 0.25,
        "label": 1,
        "trace_id": "AB" * 16,
        "request_id": "r1",
        "fields": {"clicked": 1},
    }
    fast = plain_event(doc, CFG, NOW)
    assert fast is not None and fast == parse_event(doc, "events[0]", CFG, NOW)
    assert fast.trace_id == "ab" * 16 and fast.features == {"x": 1.5, "n": 3.0, "c": "de", "m": None}
    assert plain_event({"model": "ctr", "timestamp": "2023-11-14T22:00:00Z"}, CFG, NOW) is None  # a string time


# Feature names from a few, so the same sets come back within a batch (some too long under the tight config,
# one empty).
_repeating = st.fixed_dictionaries(
    {"model": st.just("m")},
    optional={
        "features": st.dictionaries(
            st.sampled_from(["a", "b", "c", "toolong", ""]), st.floats() | st.none() | st.text(max_size=30), max_size=3
        )
    },
)


@SETTINGS
@given(st.lists(usual_shape | _repeating, max_size=12), st.sampled_from([CFG, EventsConfig(max_name_length=5)]))
def test_a_batch_gives_what_its_documents_give_one_at_a_time(docs: list[dict[str, Any]], cfg: EventsConfig) -> None:
    ok, bad = parse_events(docs, cfg, NOW)  # the batch remembers the names it found good from one to the next
    expected: list[Any] = []
    for i, doc in enumerate(docs):
        try:
            expected.append(parse_event(doc, f"events[{i}]", cfg, NOW))
        except EventError as exc:
            expected.append((i, exc.field, exc.message))
    assert [e for e in expected if not isinstance(e, tuple)] == ok
    assert [e for e in expected if isinstance(e, tuple)] == [(r.index, r.field, r.error) for r in bad]
