"""The request join's milliseconds without ``round`` (``request_records_doc.ms_of_ns``, ``ms_of_secs``) are the
very floats ``round`` gives, on durations around every tie, at the fast path's edge and beyond it."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from sidecar.processors.request_records_doc import _EXACT_NS, ms_of_ns, ms_of_secs

# Whole microseconds up to the fast path's limit, and a few ns either side of the rounding tie (500 ns).
_NEAR_TIES = st.builds(
    lambda us, off: max(0, us * 1000 + 500 + off),
    st.integers(0, _EXACT_NS // 1000),
    st.integers(-3, 3),
)
_ANY = st.one_of(
    st.integers(0, 10**7), st.integers(0, _EXACT_NS + 10**6), _NEAR_TIES, st.integers(_EXACT_NS - 10**4, 2**64)
)


@given(_ANY)
def test_ms_of_ns_is_round(d: int) -> None:
    assert ms_of_ns(d) == round(d / 1e6, 3)


@given(st.lists(_ANY, max_size=8))
def test_ms_of_secs_is_round(ds: list[int]) -> None:
    stages = {f"s{i}": d / 1e9 for i, d in enumerate(ds)}
    assert ms_of_secs(stages) == {k: round(v * 1000, 3) for k, v in stages.items()}


def test_a_million_durations_of_a_real_spread() -> None:
    """Request and stage durations as Triton's spans give them: ns from 0 to 10 s, and ties at every scale."""
    rng = random.Random(31)
    ds = [int(rng.lognormvariate(13, 3)) for _ in range(200_000)] + [k * 1000 + 500 for k in range(0, 10**9, 9973)]
    ds += [_EXACT_NS - 1, _EXACT_NS, _EXACT_NS + 500, 2**53 + 1, 2**64 - 1]
    assert [ms_of_ns(d) for d in ds] == [round(d / 1e6, 3) for d in ds]
    secs = {str(i): d / 1e9 for i, d in enumerate(ds)}
    assert ms_of_secs(secs) == {k: round(v * 1000, 3) for k, v in secs.items()}
    assert sum(d % 1000 == 500 for d in ds) > 100_000  # ties (the fast path leaves them to round()) were there
