"""A real BentoML 1.4.40 service (``@bentoml.service``) serving a scikit-learn model the test trains, read by the
sidecar.

The service is one file written here, served from its source with ``bentoml serve`` (one worker). The client
sends good rows, rows of the wrong width (the model raises: 500) and bodies that fail BentoML's validation
(400). BentoML counts every one of them by HTTP status in its ``bentoml_service_*`` families (the legacy
``bentoml_api_server_*`` names of the first fixture are not what a 1.4 service writes); its readiness route,
which the start-up polled, is counted by BentoML and skipped by the profile. The sidecar's counts must equal the
client's exactly, and its latency average must be the exposition's sum over count for exactly those requests.
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

SERVICE, VERSION = "Iris", ""  # served from source: BentoML says service_version="not available"
GOOD, WRONG_SHAPE, INVALID = 12, 4, 2
DURATION = "sidecar_serving_gen_ai_server_request_duration_seconds"

TRAIN = """
import sys, joblib
from sklearn.linear_model import LogisticRegression
X = [[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, 0.2], [6.2, 2.9, 4.3, 1.3],
     [5.9, 3.0, 5.1, 1.8], [6.3, 3.3, 6.0, 2.5], [5.7, 2.8, 4.1, 1.3]]
joblib.dump(LogisticRegression(max_iter=500).fit(X, [0, 0, 1, 2, 2, 1]), sys.argv[1])
"""

SERVICE_PY = """
import os

import bentoml
import joblib


@bentoml.service(workers=1)
class Iris:
    def __init__(self) -> None:
        self.model = joblib.load(os.environ["IRIS_MODEL"])

    @bentoml.api
    def predict(self, rows: list[list[float]]) -> list[int]:
        return [int(y) for y in self.model.predict(rows)]
"""


@dataclass
class Run:
    seen: Observed
    client: Tally


def _drive(base: str) -> Tally:
    tally = Tally()
    with client(base) as c:
        for i in range(GOOD):
            r = tally.send(lambda i=i: c.post("/predict", json={"rows": [[5.0 + i / 10, 3, 1.4, 0.2]]}), expect_ok=True)
            assert len(r.json()) == 1
            if i < WRONG_SHAPE:  # the model raises: X has 3 features, it expects 4
                r = tally.send(lambda: c.post("/predict", json={"rows": [[5.1, 3.5, 1.4]]}), expect_ok=False)
                assert r.status_code == 500
        for _ in range(INVALID):
            r = tally.send(lambda: c.post("/predict", json={"no": "rows"}), expect_ok=False)
            assert r.status_code == 400
    return tally


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    venv = server_venv("bentoml")
    work: Path = tmp_path_factory.mktemp("bentoml")
    subprocess.run([str(venv / "bin" / "python"), "-c", TRAIN, str(work / "model.joblib")], check=True, timeout=120)
    (work / "service.py").write_text(SERVICE_PY)
    port = free_port()
    env = {"IRIS_MODEL": str(work / "model.joblib"), "BENTOML_HOME": str(work / "home"), "BENTOML_DO_NOT_TRACK": "true"}
    argv = [str(venv / "bin" / "bentoml"), "serve", "service:Iris", "--host", "127.0.0.1", "--port", str(port)]
    server = ServerProcess(argv, cwd=work, log=work / "bentoml.log", env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        server.start(base + "/readyz", timeout_s=90)
        seen, client = observe("bento", base + "/metrics", lambda: _drive(base))
        yield Run(seen, client)
    finally:
        server.stop()


def _requests(run: Run, outcome: str) -> float | None:
    return run.seen.sidecar("sidecar_serving_requests_total", model=SERVICE, version=VERSION, outcome=outcome)


def test_the_sidecar_detects_bentoml(run: Run) -> None:
    assert "bentoml_service_request_total{" in run.seen.after and "bentoml_api_server" not in run.seen.after
    assert run.seen.readiness.endswith("bentoml profile, 1 models")


def test_request_counts_equal_the_clients(run: Run) -> None:
    c = run.client
    assert (c.ok, c.failed) == (GOOD, WRONG_SHAPE + INVALID)
    assert _requests(run, "success") == c.ok
    assert _requests(run, "failure") == c.failed
    ratio = run.seen.sidecar("sidecar_serving_error_ratio", model=SERVICE, version=VERSION)
    assert ratio == pytest.approx(c.failed / c.sent)


def test_the_readiness_probes_bentoml_counted_are_not_requests(run: Run) -> None:
    probes = raw_value(run.seen.after, "bentoml_service_request_total", endpoint="/readyz")
    assert probes >= 1  # the start-up's polling, counted by BentoML
    assert _requests(run, "success") == GOOD


def test_latency_average_is_the_servers_sum_over_the_clients_count(run: Run) -> None:
    fam, seen = "bentoml_service_request_duration_seconds", run.seen
    codes = ("200", "400", "500")

    def total(text: str, part: str) -> float:
        return sum(raw_value(text, f"{fam}_{part}", endpoint="/predict", http_response_code=c) for c in codes)

    count = total(seen.after, "count") - total(seen.before, "count")
    assert count == run.client.sent
    avg = seen.sidecar(DURATION, model=SERVICE, version=VERSION, stat="avg")
    assert avg == pytest.approx((total(seen.after, "sum") - total(seen.before, "sum")) / count, rel=1e-9)
    assert 0 < avg < sum(run.client.seconds) / run.client.sent  # BentoML times inside the client's round trip

    # The median from the buckets lies in the bucket where the exposition's own cumulative counts pass half.
    def buckets(text: str) -> dict[float, float]:
        out: dict[float, float] = {}
        for c in codes:
            for le, v in raw_buckets(text, fam, endpoint="/predict", http_response_code=c).items():
                out[le] = out.get(le, 0.0) + v
        return out

    lower, upper = bucket_of(buckets(seen.after), buckets(seen.before), count / 2)
    p50 = seen.sidecar(DURATION, model=SERVICE, version=VERSION, stat="p50")
    assert p50 is not None and lower <= p50 <= upper


def test_nothing_is_in_flight_after_the_traffic(run: Run) -> None:
    assert run.seen.sidecar("sidecar_serving_requests_in_flight", model=SERVICE, version=VERSION) == 0
