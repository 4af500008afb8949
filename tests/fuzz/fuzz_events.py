"""atheris target: the events decoder and parser refuse bad input only with ValueError / a rejection, and
every event they accept holds usable values (finite numbers, a time in range)."""

import math
import sys
from pathlib import Path

import atheris

# Fuzz the checkout this file is in, not whichever copy of the package is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    from sidecar.sources.events.config import EventsConfig
    from sidecar.sources.events.http import EventsEndpoint
    from sidecar.sources.events.parse import parse_events
    from sidecar.timerange import renderable

NOW = 1_700_000_000.0
CFG = EventsConfig()
TYPES = ("application/json", "application/x-ndjson", "application/json-seq")
ENDPOINT = EventsEndpoint.__new__(EventsEndpoint)  # only _decode is used: it needs the config alone
ENDPOINT.cfg = CFG


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    try:
        docs = ENDPOINT._decode(data[1:], TYPES[data[0] % len(TYPES)])
    except ValueError:
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


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
