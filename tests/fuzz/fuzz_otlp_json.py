"""atheris target: the OTLP JSON decoder refuses bad input only with ParseError, what it accepts is bounded and
can be stored and shown, and its msgspec fast path agrees with the walk."""

import sys
from pathlib import Path

import atheris

# The checkout this file is in, not whichever sidecar is installed in the environment.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# Only the decoders (and the records they build) are instrumented for coverage, so they are imported first:
# instrumenting the config and metrics libraries as well makes the start take a minute.
with atheris.instrument_imports(include=["sidecar.sources.otlp", "sidecar.records"]):
    from sidecar.sources.otlp.decode import decode_json, decode_json_doc, load_json
    from sidecar.sources.otlp.json_fast import decode_fast
    from sidecar.sources.otlp.limits import SpanLimits

from prometheus_client import CollectorRegistry

from sidecar.clock import FakeClock
from sidecar.config import parse_config
from sidecar.errors import ParseError
from sidecar.state.trace_hub import TraceHub

LIMITS = SpanLimits(name_chars=24, value_chars=64)
HUB = TraceHub(
    parse_config({"traces": {"enabled": True, "max_traces": 50}}).traces,
    registry=CollectorRegistry(),
    clock=FakeClock(),
)


def TestOneInput(data: bytes) -> None:
    try:
        result = decode_json(data, LIMITS)
    except ParseError:
        return
    fast = decode_fast(data, LIMITS)
    if fast is not None:
        # The typed fast path must give exactly what the walk gives, wherever it answers at all.
        try:
            slow = decode_json_doc(load_json(data), LIMITS)
        except ParseError as exc:
            # The one known leniency of the fast path (json_fast's docstring): an unread number beyond doubles.
            if "infinity" in str(exc):
                return
            raise
        same = fast.records == slow.records and (fast.rejected, fast.truncations) == (slow.rejected, slow.truncations)
        assert same, f"the two JSON paths differ on {data!r}: {fast} != {slow}"
    HUB.ingest_records(result.records, "fuzz")
    for s in result.spans:
        assert len(s.name) <= LIMITS.name_chars, s.name
        assert 0 <= s.start_unix_nano < 1 << 64 and 0 <= s.end_unix_nano < 1 << 64
        for k, v in s.attributes.items():
            assert len(k) <= LIMITS.name_chars and (not isinstance(v, str) or len(v) <= LIMITS.value_chars)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
