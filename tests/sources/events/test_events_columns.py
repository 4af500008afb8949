"""The columnar door (``columns.parse_columns``) against the per-event one (``parse_events``): whenever it
accepts a batch, its columns hold exactly the events ``parse_events`` gives, with nothing refused; it accepts
the common shape; and any document it is not sure of (a bool, a null feature, a string, a refused time, a
reordered or missing name, an unknown key) sends the whole batch to ``parse_events``, which words the refusal.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sidecar.model import Batch, EventColumns
from sidecar.sources.events.columns import parse_columns
from sidecar.sources.events.config import EventsConfig
from sidecar.sources.events.parse import parse_events
from sidecar.wiring.event_subs import as_events

NOW = 1_700_000_000.0
CFG = EventsConfig(max_features_per_event=8, max_name_length=12)


def _events_of(blocks: list[EventColumns]) -> list[Any]:
    return list(as_events(Batch(kind="event_columns", source="t", items=tuple(blocks))).items)


def _doc(rnd: random.Random, names: list[str], model: str = "m", version: Any = "1") -> dict[str, Any]:
    doc: dict[str, Any] = {"model": model, "version": version, "features": {n: rnd.gauss(0, 1) for n in names}}
    r = rnd.random()
    if r < 0.4:
        doc["timestamp"] = NOW - rnd.uniform(0, 3600)
    elif r < 0.6:
        doc["timestamp"] = int(NOW) - rnd.randint(0, 3600)
    if rnd.random() < 0.7:
        doc["score"] = rnd.choice([rnd.random(), None, 1, 0])
    return doc


def _same_as_per_event(docs: list[Any]) -> list[EventColumns] | None:
    blocks = parse_columns(docs, CFG, NOW)
    if blocks is not None:
        events, rejected = parse_events(docs, CFG, NOW)
        assert rejected == []
        got = _events_of(blocks)
        assert got == events
        for e in got:  # the same Python types as one by one, not numpy scalars
            assert all(type(v) is float for v in e.features.values())
            assert type(e.timestamp) is float and (e.score is None or type(e.score) is float)
    return blocks


def test_the_common_shape_is_taken_as_columns_equal_to_the_per_event_events() -> None:
    rnd = random.Random(7)
    docs = [_doc(rnd, ["a", "b", "c"]) for _ in range(300)]
    docs[5]["features"]["b"] = 3  # an integer is a number
    blocks = _same_as_per_event(docs)
    assert blocks is not None and len(blocks) == 1
    (b,) = blocks
    assert b.n == 300 and list(b.features) == ["a", "b", "c"] and b.features["b"][5] == 3.0
    assert b.timestamps.dtype == np.float64 and b.features["a"].flags.c_contiguous
    assert b.timestamps[[i for i, d in enumerate(docs) if "timestamp" not in d]].tolist() == [NOW] * sum(
        "timestamp" not in d for d in docs
    )


def test_several_model_versions_keep_their_batch_positions() -> None:
    rnd = random.Random(8)
    docs = [_doc(rnd, ["x"], model=rnd.choice(["m", "n"]), version=rnd.choice(["1", 1, None])) for _ in range(50)]
    blocks = _same_as_per_event(docs)
    assert blocks is not None
    assert {(b.model, b.version) for b in blocks} <= {
        ("m", "1"),
        ("n", "1"),
        ("m", "unversioned"),
        ("n", "unversioned"),
    }
    rows = sorted(np.concatenate([b.rows() for b in blocks]).tolist())
    assert rows == list(range(50))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d["features"].__setitem__("b", True), "a bool is not a number"),
        (lambda d: d["features"].__setitem__("b", 1.0) or d["features"].__setitem__("c", False), "a bool as 0"),
        (lambda d: d["features"].__setitem__("b", None), "a null feature"),
        (lambda d: d["features"].__setitem__("b", "1.5"), "a string feature"),
        (lambda d: d["features"].__setitem__("b", math.nan), "NaN"),
        (lambda d: d["features"].__setitem__("b", 2**80), "an int beyond 64 bits"),
        (lambda d: d.__setitem__("features", {"b": 1.0, "a": 2.0, "c": 3.0}), "reordered names"),
        (lambda d: d["features"].pop("c"), "a missing name"),
        (lambda d: d["features"].__setitem__("x" * 13, 1.0), "a name too long"),
        (lambda d: d.__setitem__("timestamp", NOW + 301), "a future time"),
        (lambda d: d.__setitem__("timestamp", "2023-11-14T22:00:00Z"), "a string time"),
        (lambda d: d.__setitem__("timestamp", True), "a bool time"),
        (lambda d: d.__setitem__("score", math.inf), "an infinite score"),
        (lambda d: d.__setitem__("score", False), "a bool score"),
        (lambda d: d.__setitem__("version", True), "a bool version"),
        (lambda d: d.__setitem__("model", ""), "an empty model"),
        (lambda d: d.__setitem__("request_id", "r1"), "a key outside the common shape"),
        (lambda d: d.__setitem__("feature", {}), "an unknown key"),
    ],
)
def test_one_odd_event_sends_the_whole_batch_to_the_per_event_door(change: Any, why: str) -> None:
    rnd = random.Random(9)
    docs = [_doc(rnd, ["a", "b", "c"]) for _ in range(20)]
    assert _same_as_per_event(docs) is not None
    change(docs[11])
    assert parse_columns(docs, CFG, NOW) is None, why


json_numbers = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.booleans()
    | st.none()
    | st.sampled_from(["1.5", ""])
)


valid_doc = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["m", "n"]),
        "features": st.sampled_from([["a", "b"], ["c"]]).flatmap(
            lambda ks: st.fixed_dictionaries({k: st.floats(-5, 5) | st.integers(-9, 9) for k in ks})
        ),
    },
    optional={
        "version": st.sampled_from(["1", 1, None]),
        "timestamp": st.floats(NOW - 40 * 86400, NOW + 600) | st.none(),
        "score": st.floats(0, 1) | st.none(),
    },
)
odd_value = json_numbers | st.sampled_from(["", True, 1.5]) | st.floats(NOW - 40 * 86400, NOW + 600)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(valid_doc, min_size=1, max_size=12),
    st.none()
    | st.tuples(
        st.integers(0, 11),
        st.sampled_from(
            ["model", "version", "timestamp", "score", "features.a", "features.b", "features.c", "feature"]
        ),
        odd_value,
    ),
)
def test_whatever_it_accepts_is_what_the_per_event_door_accepts(docs: list[dict[str, Any]], odd: Any) -> None:
    """Batches of the common shape (names and times near the bounds included), half of them with one value
    made odd: a bool, a null, a string, NaN, inf, an int beyond 64 bits, a time out of bounds, a new key."""
    if odd is not None:
        i, key, value = odd
        doc = docs[i % len(docs)]
        if key.startswith("features."):
            doc["features"][key.split(".")[1]] = value
        else:
            doc[key] = value
    _same_as_per_event(docs)


def test_readers_without_a_columnar_path_share_one_conversion_per_batch() -> None:
    """Every reader of a columnar batch that takes Events gets the same Events, built once for that batch; the
    next batch gets its own."""
    from prometheus_client import CollectorRegistry

    from sidecar.component import Bus
    from sidecar.wiring.event_subs import subscribe_events

    bus = Bus(CollectorRegistry())
    seen: dict[str, list[Batch]] = {"a": [], "b": []}
    subscribe_events(bus, "a", seen["a"].append)
    subscribe_events(bus, "b", seen["b"].append)
    rnd = random.Random(7)
    batches = []
    for _ in range(2):
        blocks = parse_columns([_doc(rnd, ["x", "y"]) for _ in range(5)], CFG, NOW)
        assert blocks is not None
        batches.append(Batch(kind="event_columns", source="t", items=tuple(blocks)))
        bus.publish(batches[-1])
    a, b = seen["a"], seen["b"]
    assert [x.kind for x in a] == ["events", "events"] and len(a[0].items) == 5
    assert a[0] is b[0] and a[1] is b[1]  # one conversion per batch, shared
    assert a[0].items != a[1].items  # not the previous batch's events
    assert list(a[1].items) == _events_of(list(batches[1].items))


# ---- the typed door (typed.py): a body decoded by msgspec with the learned names, against parse_events -------
# Bodies are written as text, so what a Python dict cannot hold is sent too: a name twice, an int beyond 64
# bits, a number beyond float range (1e400), names reordered or missing, blank and CRLF lines.

NAMES = ("a", "b", "c")
OTHER = ("y", "x")  # a second model's names, learned before NAMES
_ODD_NUMBERS = ["true", "null", '"1.5"', "1e400", "-1e400", str(2**70), str(2**64), str(2**63 + 1), "1e-400"]
text_number = (
    st.floats(-1e6, 1e6).map(repr)
    | st.integers(-(2**80), 2**80).map(str)
    | st.sampled_from(["0", "-0", "1E+3", "9007199254740993", "2.5e-324"])
)


def _pick(draw: st.DrawFn, good: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> str:
    """Mostly a good value; one in twenty-five an odd one (so a batch of several events is often all good)."""
    return draw(odd if draw(st.integers(0, 24)) == 0 else good)


@st.composite
def text_event(draw: st.DrawFn, learned: tuple[str, ...] = NAMES) -> str:
    names = list(learned)
    if draw(st.integers(0, 9)) == 0:
        names = draw(st.permutations(names))
    if draw(st.integers(0, 24)) == 0:
        names = names[:-1]  # a missing name
    if draw(st.integers(0, 24)) == 0:
        names.append(draw(st.sampled_from(["a", "d", "x" * 13])))  # a name twice, unknown, too long
    feats = ",".join(f'"{n}":{_pick(draw, text_number, st.sampled_from(_ODD_NUMBERS))}' for n in names)
    model = _pick(draw, st.sampled_from(['"m"', '"n"']), st.sampled_from(['""', '"' + "x" * 13 + '"', "1"]))
    parts = [f'"model":{model}']
    if draw(st.booleans()):
        good = st.sampled_from(['"1"', "1", "null", "-3", str(2**63 - 1)])
        v = _pick(draw, good, st.sampled_from(["true", str(2**63), str(2**64), str(2**70), '""', "1.5"]))
        parts.append(f'"version":{v}')
    if draw(st.booleans()):
        good = st.floats(NOW - 40 * 86400, NOW + 600).map(repr) | st.integers(int(NOW) - 3600, int(NOW)).map(str)
        t = _pick(draw, good | st.just("null"), st.sampled_from(['"2023-11-14T22:00:00Z"', "true", str(2**70)]))
        parts.append(f'"timestamp":{t}')
    parts.append(f'"features":{{{feats}}}')
    if draw(st.booleans()):
        score = _pick(draw, text_number | st.just("null"), st.sampled_from(["true", '"x"', "1e400"]))
        parts.append(f'"score":{score}')
    if draw(st.integers(0, 24)) == 0:
        parts.append(draw(st.sampled_from(['"label":1', '"request_id":"r"', '"model":"n"'])))  # "model" twice
    return "{" + ",".join(draw(st.permutations(parts))) + "}"


def _typed_door() -> Any:
    from sidecar.sources.events.typed import TypedDoor

    door = TypedDoor(CFG)
    for names in (OTHER, NAMES):  # two name sets learned: NAMES tried first, then OTHER
        learned = parse_columns([_doc(random.Random(1), list(names))], CFG, NOW)
        assert learned is not None
        door.learn(learned)
    return door


def _same_as_parse_events(blocks: list[EventColumns] | None, docs: list[Any]) -> bool:
    if blocks is None:
        return False
    events, rejected = parse_events(docs, CFG, NOW)
    assert rejected == []
    got = sorted(((int(r), e) for b in blocks for r, e in zip(b.rows(), b.events(), strict=True)), key=lambda p: p[0])
    assert [e for _, e in got] == events
    for _, e in got:
        assert all(type(v) is float for v in e.features.values()) and type(e.timestamp) is float
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([NAMES, NAMES, OTHER]).flatmap(lambda names: st.lists(text_event(names), min_size=1, max_size=8))
    | st.lists(text_event(NAMES) | text_event(OTHER), min_size=2, max_size=4),  # a batch mixing both
    st.sampled_from(["json", "list", "ndjson", "lines"]),
)
def test_the_typed_door_takes_only_what_parse_events_accepts_and_gives_the_same_events(
    events: list[str], form: str
) -> None:
    """Whatever body the typed door takes, ``orjson`` + ``parse_events`` accept every event of it, and the
    events are equal (values, times, versions, scores); whatever it is not sure of, it leaves (None)."""
    from sidecar.sources.media import decode_documents

    door = _typed_door()
    if form in ("json", "list"):
        text = f'{{"events":[{",".join(events)}]}}' if form == "json" else f"[{','.join(events)}]"
        body, mtype = text.encode(), "application/json"
    else:
        body, mtype = ("\r\n\n".join(events) + "\n").encode(), "application/x-ndjson"
    try:
        docs = decode_documents(body, mtype, wrapper="events", max_docs=CFG.max_events_per_batch, what="an event")
    except ValueError:
        docs = None
    lines = form == "lines"
    got = door.lines(body.split(b"\n"), NOW) if lines else door.body(body, mtype != "application/json", NOW)
    if got is not None:
        assert docs is not None
        _same_as_parse_events(got, docs)


def test_the_typed_door_takes_the_common_shape_and_leaves_the_rest() -> None:
    door = _typed_door()
    rnd = random.Random(3)
    docs = [_doc(rnd, ["c", "a", "b"] if i == 4 else list(NAMES), version=rnd.choice(["1", 2])) for i in range(40)]
    docs[7]["features"]["b"] = 2**60 + 1  # an integer is the float float() gives
    body = orjson.dumps({"events": docs})
    assert _same_as_parse_events(door.body(body, False, NOW), docs)
    ndjson = b"\n".join(map(orjson.dumps, docs))
    assert _same_as_parse_events(door.body(ndjson, True, NOW), docs)
    for odd in ("true", "null", "1e400", '"1"', '1,"b":true', '1,"d":1', "1e400"):
        text = re.sub(r'"b":[-0-9.eE+]+', '"b":' + odd, body.decode(), count=1)
        assert door.body(text.encode(), False, NOW) is None, odd
    assert door.body(b"\x1e" + ndjson, True, NOW) is None  # json-seq: the caller's path drops the RS
    assert door.body(orjson.dumps({"events": docs * 300}), False, NOW) is None  # over max_events_per_batch


def test_batches_of_two_models_in_turn_both_go_through_the_typed_door() -> None:
    """Two models' batches in turn (one sidecar, two model servers): each first event picks its learned names."""
    door = _typed_door()
    rnd = random.Random(4)
    for i in range(4):
        names, model = (NAMES, "m") if i % 2 else (OTHER, "n")
        docs = [_doc(rnd, list(names), model=model) for _ in range(30)]
        assert _same_as_parse_events(door.body(orjson.dumps(docs), False, NOW), docs)
        assert _same_as_parse_events(door.body(b"\n".join(map(orjson.dumps, docs)), True, NOW), docs)
    mixed = [_doc(rnd, list(NAMES)), _doc(rnd, list(OTHER), model="n")]
    assert door.body(orjson.dumps(mixed), False, NOW) is None  # one batch, two name sets: the old way


@pytest.mark.parametrize("name", ["<img x>&\"'", "back\\slash", "tab\there", "nul\x00"])
def test_names_msgspec_cannot_spell_are_not_learned_and_still_accepted(name: str) -> None:
    """msgspec refuses a field name with a quote, a backslash or a control character: such a name set is not
    learned (no typed decoder), and its batches are still taken the orjson way, equal to parse_events."""
    from sidecar.sources.events.typed import TypedDoor

    door = TypedDoor(CFG)
    docs = [_doc(random.Random(i), [name, "a"]) for i in range(5)]
    blocks = parse_columns(docs, CFG, NOW)
    assert _same_as_parse_events(blocks, docs)
    door.learn(blocks)  # must not raise
    assert door.body(orjson.dumps(docs), False, NOW) is None  # nothing learned: the caller's orjson path decides


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12),
        min_size=1,
        max_size=4,
        unique=True,
    ),
    st.integers(0, 2**16),
)
def test_any_feature_names_learned_or_not_never_raise_and_keep_the_same_events(names: list[str], seed: int) -> None:
    """Whatever the feature names (quotes, backslashes, control characters, any script), learning them and
    decoding the next bodies with them raises nothing, and what the typed door takes equals parse_events."""
    from sidecar.sources.events.typed import TypedDoor

    door = TypedDoor(CFG)
    rnd = random.Random(seed)
    first = [_doc(rnd, names) for _ in range(3)]
    blocks = parse_columns(first, CFG, NOW)
    if blocks is None:
        return
    door.learn(blocks)
    docs = [_doc(rnd, names) for _ in range(4)]
    got = door.body(orjson.dumps(docs), False, NOW)
    assert got is None or _same_as_parse_events(got, docs)
    event("typed door took the body" if got is not None else "typed door left the body")  # 67 of 200 took it
    lines = [orjson.dumps(d) for d in docs]
    got = door.lines(lines, NOW)
    assert got is None or _same_as_parse_events(got, docs)
