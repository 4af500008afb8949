"""A real KServe 0.21.0 Python model server (``kserve.ModelServer``) serving a scikit-learn model the test trains,
read by the sidecar.

The model is a ``kserve.Model`` subclass written here around a LogisticRegression fitted on six rows. The client
sends good v1 requests, rows of the wrong width (the model raises: 500), a body KServe's own validation refuses
(``instances`` not a list: 400) and a request for an unknown model (404). KServe counts no requests by outcome:
its predict histogram counts every request that reached ``predict``, failed or not, and the sidecar reads that
count as requests received (outcome ``other``); it must equal the client's requests that reached the model, and
the average must be the exposition's own sum over count.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servers.live import (
    Observed,
    ServerProcess,
    Tally,
    bucket_of,
    client,
    free_port,
    observe,
    raw_buckets,
    raw_value,
    server_venv,
)

pytestmark = pytest.mark.servers

MODEL = "iris"
GOOD, WRONG_SHAPE, INVALID, UNKNOWN = 12, 4, 2, 1
COMPUTE = "sidecar_serving_compute_duration_seconds"

TRAIN = """
import sys, joblib
from sklearn.linear_model import LogisticRegression
X = [[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, 0.2], [6.2, 2.9, 4.3, 1.3],
     [5.9, 3.0, 5.1, 1.8], [6.3, 3.3, 6.0, 2.5], [5.7, 2.8, 4.1, 1.3]]
joblib.dump(LogisticRegression(max_iter=500).fit(X, [0, 0, 1, 2, 2, 1]), sys.argv[1])
"""

SERVE_PY = """
import sys

import joblib
import kserve


class Iris(kserve.Model):
    def __init__(self, name, path):
        super().__init__(name)
        self.model = joblib.load(path)
        self.ready = True

    def predict(self, payload, headers=None):
        return {"predictions": [int(y) for y in self.model.predict(payload["instances"])]}


if __name__ == "__main__":
    kserve.ModelServer().start([Iris("iris", sys.argv[1])])
"""


@dataclass
class Run:
    seen: Observed
    reached: Tally  # good and wrong-width requests: they reach predict
    refused: Tally  # 400 and 404: they never reach predict


def _drive(base: str) -> tuple[Tally, Tally]:
    reached, refused = Tally(), Tally()
    url = f"/v1/models/{MODEL}:predict"
    with client(base) as c:
        for i in range(GOOD):
            r = reached.send(lambda i=i: c.post(url, json={"instances": [[5.0 + i / 10, 3, 1.4, 0.2]]}), expect_ok=True)
            assert len(r.json()["predictions"]) == 1
            if i < WRONG_SHAPE:  # the model raises: X has 3 features, it expects 4
                r = reached.send(lambda: c.post(url, json={"instances": [[5.1, 3.5, 1.4]]}), expect_ok=False)
                assert r.status_code == 500
        for _ in range(INVALID):
            r = refused.send(lambda: c.post(url, json={"instances": "not a list"}), expect_ok=False)
            assert r.status_code == 400, r.text
        for _ in range(UNKNOWN):
            r = refused.send(lambda: c.post("/v1/models/nosuch:predict", json={"instances": [[1.0]]}), expect_ok=False)
            assert r.status_code == 404
    return reached, refused


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    venv = server_venv("kserve")
    work: Path = tmp_path_factory.mktemp("kserve")
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-c", TRAIN, str(work / "model.joblib")], check=True, timeout=120)
    (work / "serve.py").write_text(SERVE_PY)
    port = free_port()
    # KServe binds 0.0.0.0 (its own choice, not configurable); the test talks to it on loopback only.
    argv = [py, "serve.py", str(work / "model.joblib"), "--http_port", str(port), "--enable_grpc", "false"]
    server = ServerProcess(argv, cwd=work, log=work / "kserve.log")
    try:
        base = f"http://127.0.0.1:{port}"
        server.start(f"{base}/v1/models/{MODEL}", timeout_s=90)
        seen, tallies = observe("kserve", base + "/metrics", lambda: _drive(base))
        yield Run(seen, *tallies)
    finally:
        server.stop()


def test_the_sidecar_detects_kserve_before_its_first_request(run: Run) -> None:
    assert "request_predict_seconds_count{" not in run.seen.before
    assert run.seen.ready_before.endswith("kserve profile, 0 models")
    assert run.seen.readiness.endswith("kserve profile, 1 models")


def test_requests_received_equal_the_clients_requests_that_reached_the_model(run: Run) -> None:
    assert (run.reached.ok, run.reached.failed) == (GOOD, WRONG_SHAPE)
    got = run.seen.sidecar("sidecar_serving_requests_total", model=MODEL, version="", outcome="other")
    assert got == run.reached.sent
    for outcome in ("success", "failure"):  # KServe has no outcome: absent, not zero
        assert run.seen.sidecar("sidecar_serving_requests_total", model=MODEL, version="", outcome=outcome) is None
    assert run.seen.sidecar("sidecar_serving_error_ratio", model=MODEL, version="") is None


def test_requests_refused_before_predict_are_counted_in_no_family_the_profile_reads(run: Run) -> None:
    """The 400 passed preprocess (KServe's preprocess histogram counts it), the 404 reached no model at all."""
    pre = "request_preprocess_seconds_count"
    assert raw_value(run.seen.after, pre, model_name=MODEL) == run.reached.sent + INVALID
    assert raw_value(run.seen.after, "request_predict_seconds_count", model_name=MODEL) == run.reached.sent
    assert "nosuch" not in run.seen.after


def test_compute_average_is_the_servers_sum_over_the_clients_count(run: Run) -> None:
    seen, fam = run.seen, "request_predict_seconds"
    count = raw_value(seen.after, f"{fam}_count", model_name=MODEL) - raw_value(seen.before, f"{fam}_count")
    total = raw_value(seen.after, f"{fam}_sum", model_name=MODEL) - raw_value(seen.before, f"{fam}_sum")
    assert count == run.reached.sent
    avg = seen.sidecar(COMPUTE, model=MODEL, version="", stat="avg")
    assert avg == pytest.approx(total / count, rel=1e-9)
    assert 0 < avg < sum(run.reached.seconds) / run.reached.sent  # predict alone, inside the client's round trip
    after, before = raw_buckets(seen.after, fam, model_name=MODEL), raw_buckets(seen.before, fam, model_name=MODEL)
    lower, upper = bucket_of(after, before, count / 2)
    p50 = seen.sidecar(COMPUTE, model=MODEL, version="", stat="p50")
    assert p50 is not None and lower <= p50 <= upper
