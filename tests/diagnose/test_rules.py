"""Each diagnosis made to happen from recorded Triton expositions, and its quiet twin that must not fire."""

from __future__ import annotations

from sidecar.diagnose.config import DiagnoseConfig
from sidecar.diagnose.observe import Probe
from sidecar.diagnose.rules import Inputs, diagnose
from tests.diagnose.recorded import PYTHON_ONE, probe

CFG = DiagnoseConfig()


def codes(i: Inputs) -> list[tuple[str, str]]:
    return [(d.code, d.model) for d in diagnose(i, CFG)]


def test_gpu_idle_while_requests_queue() -> None:
    # 100 requests in 30 s, 50 ms queued each, GPU at 3%: CPU-side work is the bottleneck.
    prev = probe(0.0, success=1000, queue_us=0, compute_us=0, gpu_util=0.03)
    cur = probe(30.0, success=1100, queue_us=5_000_000, compute_us=1_000_000, pending=4, gpu_util=0.03)
    found = diagnose(Inputs(prev, cur), CFG)
    idle = [d for d in found if d.code == "gpu_idle_queue"]
    assert [(d.model, d.version) for d in idle] == [("fraud", "1")]
    assert "GPU idle while requests queue: pre/post-processing or CPU bound" in idle[0].problem
    assert idle[0].facts["queue_secs"] == 0.05


def test_busy_gpu_with_a_queue_is_not_idle() -> None:
    prev = probe(0.0, success=1000, queue_us=0, compute_us=0, gpu_util=0.95)
    cur = probe(30.0, success=1100, queue_us=5_000_000, compute_us=1_000_000, pending=4, gpu_util=0.95)
    assert ("gpu_idle_queue", "fraud") not in codes(Inputs(prev, cur))


def test_idle_gpu_without_a_queue_is_not_a_diagnosis() -> None:
    prev = probe(0.0, success=1000, queue_us=0, compute_us=0, gpu_util=0.03)
    cur = probe(30.0, success=1100, queue_us=10_000, compute_us=1_000_000, gpu_util=0.03)
    assert ("gpu_idle_queue", "fraud") not in codes(Inputs(prev, cur))


def test_python_model_busy_on_one_instance_while_queue_grows() -> None:
    # 29 s of compute in a 30 s interval on one instance, pending 2 -> 9.
    prev = probe(0.0, PYTHON_ONE, success=1000, queue_us=0, compute_us=0, pending=2)
    cur = probe(30.0, PYTHON_ONE, success=1300, queue_us=60_000_000, compute_us=29_000_000, pending=9)
    found = [d for d in diagnose(Inputs(prev, cur), CFG) if d.code == "python_single_instance_busy"]
    assert [(d.model, d.version) for d in found] == [("fraud", "1")]
    assert "raise instance_group count" in found[0].action
    assert found[0].facts["busy_ratio"] == round(29 / 30, 3)


def test_busy_model_with_two_instances_is_not_diagnosed() -> None:
    two = dict(PYTHON_ONE, fraud=PYTHON_ONE["fraud"].__class__("python", 2))
    prev = probe(0.0, two, success=1000, queue_us=0, compute_us=0, pending=2)
    cur = probe(30.0, two, success=1300, queue_us=60_000_000, compute_us=29_000_000, pending=9)
    assert ("python_single_instance_busy", "fraud") not in codes(Inputs(prev, cur))


def test_one_instance_half_busy_is_not_diagnosed() -> None:
    prev = probe(0.0, PYTHON_ONE, success=1000, queue_us=0, compute_us=0, pending=2)
    cur = probe(30.0, PYTHON_ONE, success=1300, queue_us=60_000_000, compute_us=15_000_000, pending=9)
    assert ("python_single_instance_busy", "fraud") not in codes(Inputs(prev, cur))


def test_summaries_off_from_an_exposition_without_summary_series() -> None:
    cur = probe(0.0, success=10, queue_us=1, compute_us=1, summaries=False)
    assert ("summaries_off", "") in codes(Inputs(None, cur))
    on = probe(0.0, success=10, queue_us=1, compute_us=1, summaries=True)
    assert ("summaries_off", "") not in codes(Inputs(None, on))


def test_no_spans_needs_silence_and_traffic() -> None:
    prev = probe(0.0, success=1000, queue_us=0, compute_us=0)
    busy = probe(30.0, success=1100, queue_us=0, compute_us=0)
    idle = probe(30.0, success=1000, queue_us=0, compute_us=0)
    assert ("no_spans", "") in codes(Inputs(prev, busy, silent_secs=600.0))
    assert ("no_spans", "") not in codes(Inputs(prev, busy, silent_secs=599.0))
    assert ("no_spans", "") not in codes(Inputs(prev, idle, silent_secs=3600.0))
    assert ("no_spans", "") not in codes(Inputs(prev, busy, silent_secs=None))
    down = Probe(at=30.0, url="u", error="cannot reach", reason="connect")
    assert ("no_spans", "") not in codes(Inputs(prev, down, silent_secs=3600.0))
    assert ("no_spans", "") not in codes(Inputs(None, busy, silent_secs=3600.0))


def test_metrics_404_only_on_404() -> None:
    url = "http://triton:8000/metrics"
    e404 = Probe(at=0.0, url=url, error="answered HTTP 404", reason="http_status", status=404)
    e500 = Probe(at=0.0, url=url, error="answered HTTP 500", reason="http_status", status=500)
    assert codes(Inputs(None, e404)) == [("metrics_404", "")]
    assert codes(Inputs(None, e500)) == []
