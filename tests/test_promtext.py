from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.errors import ParseError
from sidecar.promtext import parse_exposition, parse_labels

FIXTURE = Path(__file__).parent / "data" / "core" / "triton-2.51-metrics.txt"


def test_parses_every_series_of_a_real_triton_scrape_like_the_reference_parser() -> None:
    text = FIXTURE.read_text()
    ours = parse_exposition(text)
    ref = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    assert len(ours.samples) == len(ref) == 134
    ref_values = sorted((s.labels.get("model", ""), s.labels.get("quantile", ""), s.value) for s in ref)
    our_values = sorted(
        (ours.labels(lab).get("model", ""), ours.labels(lab).get("quantile", ""), v) for _n, lab, v in ours.samples
    )
    assert our_values == ref_values
    assert ours.types["nv_inference_request_summary_us"] == "summary"
    assert ours.types["nv_inference_request_failure"] == "counter"


def test_failure_reasons_are_kept_by_label() -> None:
    ours = parse_exposition(FIXTURE.read_text())
    backend = [
        v
        for n, lab, v in ours.samples
        if n == "nv_inference_request_failure"
        and ours.labels(lab) == {"model": "fraud", "reason": "BACKEND", "version": "1"}
    ]
    assert backend == [1.0]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a 1\nb 2", "truncated"),
        ("<html><body>502 Bad Gateway</body></html>\n", "line 1"),
        ("a 1\nthis is not a sample\n", "line 2"),
        ('a{b="1} 3\n', "bad label"),
        ("a{b=1} 2\n", "bad label"),
        ("a one\n", "bad value"),
    ],
)
def test_malformed_and_truncated_input_is_a_parse_error_naming_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_exposition(text)
    assert fragment in str(err.value)


def test_special_values_escapes_and_timestamps() -> None:
    expo = parse_exposition('a NaN\nb +Inf 1700000000000\nc{x="q\\"uo}te",y="n\\nl",} -Inf\n')
    values = {n: v for n, _l, v in expo.samples}
    assert math.isnan(values["a"]) and values["b"] == math.inf and values["c"] == -math.inf
    assert expo.labels(expo.samples[2][1]) == {"x": 'q"uo}te', "y": "n\nl"}


def test_label_cache_is_shared_across_scrapes() -> None:
    cache: dict[str, dict[str, str]] = {}
    parse_exposition('a{m="x"} 1\n', cache)
    assert cache == {'m="x"': {"m": "x"}}
    expo = parse_exposition('b{m="x"} 2\n', cache)
    assert expo.labels('m="x"') is cache['m="x"']


def test_parse_labels_rejects_garbage() -> None:
    assert parse_labels("") == {}
    with pytest.raises(ValueError):
        parse_labels('a="1" b="2"')
