"""``sidecar doctor`` without a real Triton: two probes through an injected client, and a bad config."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from sidecar.cli import main
from sidecar.config import parse_config
from sidecar.diagnose.doctor import CannotRun, run_doctor
from tests.diagnose.recorded import exposition


def test_two_probes_find_an_idle_gpu_with_a_queue() -> None:
    served = iter([(1000, 0), (1100, 5_000_000)])

    def triton(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            n, q = next(served)
            return httpx.Response(
                200,
                text=exposition(success=n, queue_us=q, compute_us=0, pending=3, gpu_util=0.02),
                headers={"content-type": "text/plain"},
            )
        return httpx.Response(404)

    cfg = parse_config({"triton": {"metrics_url": "http://triton:8002/metrics", "http_url": "http://triton:8000"}})
    found = run_doctor(cfg, wait_s=0.001, http=httpx.AsyncClient(transport=httpx.MockTransport(triton)))
    assert [(d.code, d.model) for d in found] == [("gpu_idle_queue", "fraud")]
    assert (
        found[0]
        .line()
        .startswith("gpu_idle_queue [fraud v1]: GPU idle while requests queue: pre/post-processing or CPU bound")
    )


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(500, text="boom"),
        httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"}),
        httpx.Response(200, text='nv_inference_count{model="x" 3\n', headers={"content-type": "text/plain"}),
    ],
)
def test_a_probe_that_fails_other_than_404_cannot_run(answer: httpx.Response) -> None:
    cfg = parse_config({"triton": {"metrics_url": "http://triton:8002/metrics", "http_url": None}})
    with pytest.raises(CannotRun):
        run_doctor(cfg, wait_s=0, http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: answer)))


def test_a_404_is_a_diagnosis_not_a_failure_to_run() -> None:
    cfg = parse_config({"triton": {"metrics_url": "http://triton:8000/metrics", "http_url": None}})
    found = run_doctor(
        cfg,
        wait_s=0,
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(404, text="Not Found"))),
    )
    assert [d.code for d in found] == ["metrics_404"]


def test_a_bad_config_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("diagnose:\n  no_spans_secs: -1\n")
    assert main(["doctor", "--config", str(bad)]) == 2
    assert "diagnose.no_spans_secs" in capsys.readouterr().err
