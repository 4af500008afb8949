"""The failure join reads label values as the exposition format defines them (escapes undone, any character)."""

from __future__ import annotations

from sidecar.sources.triton_failures import failure_counts


def test_failure_counts_unescapes_label_values():
    text = (
        'nv_inference_request_failure{model="a\\\\b",reason="BACKEND",version="1"} 2\n'
        'nv_inference_request_failure{model="say \\"hi\\"",reason="OTHER",version="2"} 1\n'
    )
    assert failure_counts(text) == {("a\\b", "1"): 2.0, ('say "hi"', "2"): 1.0}


def test_failure_counts_reads_a_brace_inside_a_label_value():
    text = 'nv_inference_request_failure{model="x}y",reason="BACKEND",version="1"} 4\n'
    assert failure_counts(text) == {("x}y", "1"): 4.0}


def test_failure_counts_skips_malformed_lines_and_keeps_the_rest():
    text = (
        'nv_inference_request_failure{model="m",version="1" reason="BACKEND"} 5\n'
        'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} nope\n'
        'nv_inference_request_failure{model="m",reason="OTHER",version="1"} 1\n'
    )
    assert failure_counts(text) == {("m", "1"): 1.0}
