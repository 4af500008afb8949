"""Property tests of the exposition parser: what prometheus_client writes, we read back exactly; anything
else is parsed or refused with ParseError, never another exception."""

from __future__ import annotations

import contextlib
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from sidecar.errors import ParseError
from sidecar.promtext import parse_exposition

_NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,20}", fullmatch=True).filter(lambda n: not n.startswith("__"))
_LABEL_NAMES = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,10}", fullmatch=True)
# Label values: any text, including quotes, backslashes, newlines and braces the writer must escape.
_VALUES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_NUMBERS = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(_NAMES, st.dictionaries(_LABEL_NAMES, _VALUES, max_size=4), _NUMBERS),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[0],
    )
)
def test_what_prometheus_client_writes_is_read_back_exactly(series: list[tuple[str, dict[str, str], float]]) -> None:
    reg = CollectorRegistry()
    for name, labels, value in series:
        names = sorted(labels)
        g = Gauge(name, "h", names, registry=reg)
        (g.labels(*[labels[n] for n in names]) if names else g).set(value)
    expo = parse_exposition(generate_latest(reg).decode())
    got = {(n, tuple(sorted(expo.labels(raw).items()))): v for n, raw, v in expo.samples}
    for name, labels, value in series:
        v = got[(name, tuple(sorted(labels.items())))]
        assert (math.isnan(v) and math.isnan(value)) or v == value


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_parses_or_is_a_parse_error(text: str) -> None:
    with contextlib.suppress(ParseError):
        expo = parse_exposition(text)
        for _name, raw, value in expo.samples:
            assert isinstance(value, float)
            expo.labels(raw)  # every label string of a parsed exposition is readable


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_a_cut_off_scrape_is_refused_not_half_read(tail: bytes) -> None:
    text = 'nv_inference_count{model="m",version="1"} 5\n'
    cut = text[: len(text) - 1 - (len(tail) % 10)]  # drop the final newline and maybe more
    try:
        parse_exposition(cut)
    except ParseError:
        return
    raise AssertionError(f"a truncated body was accepted: {cut!r}")
