"""atheris target: the events decoder and parser refuse bad input only with ValueError / a rejection, and
every event they accept holds usable values (finite numbers, a time in range); whatever batch the columnar door
takes holds exactly the events the per-event door accepts, and so does whatever body the typed door takes (it
learned the feature name ``x``)."""

import math
import sys
from pathlib import Path

import atheris
import numpy  # noqa: F401  # imported before instrumenting: the columnar door's numpy is not ours to fuzz

# Fuzz the checkout this file is in, not whichever copy of the package is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["sidecar.sources.events", "sidecar.timerange"]):
    from sidecar.sources.events.columns import parse_columns
    from sidecar.sources.events.config import EventsConfig
    from sidecar.sources.events.http import EventsEndpoint
    from sidecar.sources.events.parse import parse_events
    from sidecar.sources.events.typed import TypedDoor
    from sidecar.timerange import renderable

NOW = 1_700_000_000.0
KEYS = (
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
    "featurez",
)
CFG = EventsConfig()
TYPES = ("application/json", "application/x-ndjson", "application/json-seq")  # byte 0 % 4 == 3: structured
ENDPOINT = EventsEndpoint.__new__(EventsEndpoint)  # only _decode is used: it needs the config alone
ENDPOINT.cfg = CFG
TYPED = TypedDoor(CFG)
TYPED.learn(parse_columns([{"model": "m", "features": {"x": 1.0}}], CFG, NOW) or [])


def _value(fdp: "atheris.FuzzedDataProvider", depth: int = 0) -> object:
    kind = fdp.ConsumeIntInRange(0, 8 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 64))  # up to 2**512: beyond float
    if kind == 3:
        return fdp.ConsumeRegularFloat() if fdp.ConsumeBool() else fdp.ConsumeFloat()  # NaN, inf too
    if kind == 4:
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 40))
    if kind == 5:
        return NOW + fdp.ConsumeFloatInRange(-1e7, 1e7)
    if kind == 6:  # an ISO time, the edges of datetime's range and odd offsets included
        off = fdp.PickValueInList(["", "Z", "+00:00", "-23:59", "+14:00", "+99:00"])
        return (
            f"{fdp.ConsumeIntInRange(0, 9999):04d}-{fdp.ConsumeIntInRange(0, 13):02d}-"
            f"{fdp.ConsumeIntInRange(0, 32):02d}T{fdp.ConsumeIntInRange(0, 24):02d}:00:00{off}"
        )
    if kind == 7:
        return [_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return {fdp.ConsumeUnicodeNoSurrogates(8): _value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 4))}


def _structured(data: bytes) -> list[object]:
    """Event-shaped documents built from the bytes (Python values JSON cannot carry included), so the fuzzer
    reaches every check behind the first field instead of stopping at the JSON decoder."""
    fdp = atheris.FuzzedDataProvider(data)
    docs: list[object] = []
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        doc = {"model": "m"} if fdp.ConsumeBool() else {}
        for _ in range(fdp.ConsumeIntInRange(0, 6)):
            doc[KEYS[fdp.ConsumeIntInRange(0, len(KEYS) - 1)]] = _value(fdp)
        docs.append(doc)
    return docs


def _first(pair: tuple[int, object]) -> int:
    return pair[0]


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    typed = None
    if data[0] % 4 == 3:
        docs = _structured(data[1:])
    else:
        typed = TYPED.body(data[1:], data[0] % 4 != 0, NOW)
        try:
            docs = ENDPOINT._decode(data[1:], TYPES[data[0] % 4])
        except ValueError:
            if typed is not None:
                raise AssertionError("the typed door took a body that is not JSON to the per-event door") from None
            return
    ok, bad = parse_events(docs, CFG, NOW)
    if len(ok) + len(bad) != len(docs):
        raise AssertionError("an event was neither accepted nor rejected")
    for e in ok:
        if not renderable(e.timestamp):
            raise AssertionError(f"accepted a time out of range: {e.timestamp!r}")
        for v in [*e.fields.values(), *(f for f in e.features.values() if isinstance(f, float))]:
            if not math.isfinite(v):
                raise AssertionError(f"accepted a non-finite number: {v!r}")
    blocks = parse_columns(docs, CFG, NOW)  # the columnar door: only ever what the per-event door gives
    if blocks is not None:
        got = sorted((int(r), e) for b in blocks for r, e in zip(b.rows(), b.events(), strict=True))
        if bad or [e for _, e in got] != ok:
            raise AssertionError("the columnar door took a batch the per-event door did not give the same")
    if typed is not None:
        got = sorted(
            ((int(r), e) for b in typed for r, e in zip(b.rows(), b.events(), strict=True)), key=lambda p: p[0]
        )
        if bad or [e for _, e in got] != ok:
            raise AssertionError("the typed door took a body the per-event door did not give the same")


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
