"""A real MLServer 1.7.1 (mlserver-sklearn) serving a scikit-learn model the test trains, read by the sidecar.

The model is a LogisticRegression fitted on six rows of four features, dumped with joblib in MLServer's own venv.
MLServer runs with ``parallel_workers: 0`` (inference in the server process: one process to start and stop).
The client sends good requests to the versioned and the unversioned route, and failing ones on purpose: a wrong
input shape (the model raises: 500), a body that fails validation (422), an unknown model (404). The sidecar's
request counts must equal the client's exactly, where MLServer counts them at all, and its latency average must be
the exposition's own sum over count for exactly the client's requests.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servers.live import Observed, ServerProcess, Tally, client, free_port, observe, raw_value, server_venv

pytestmark = pytest.mark.servers

MODEL, VERSION = "iris", "v1"
GOOD, GOOD_UNVERSIONED, WRONG_SHAPE, INVALID, UNKNOWN = 12, 3, 4, 2, 1
DURATION = "sidecar_serving_gen_ai_server_request_duration_seconds"

TRAIN = """
import sys, joblib
from sklearn.linear_model import LogisticRegression
X = [[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, 0.2], [6.2, 2.9, 4.3, 1.3],
     [5.9, 3.0, 5.1, 1.8], [6.3, 3.3, 6.0, 2.5], [5.7, 2.8, 4.1, 1.3]]
joblib.dump(LogisticRegression(max_iter=500).fit(X, [0, 0, 1, 2, 2, 1]), sys.argv[1])
"""


@dataclass
class Run:
    seen: Observed
    versioned: Tally  # /v2/models/iris/versions/v1/infer: good and wrong-shape requests
    unversioned: Tally  # /v2/models/iris/infer
    invalid: Tally  # 422: never reached the data plane
    unknown: Tally  # 404: a model that does not exist


def _body(row: list[float]) -> dict[str, object]:
    return {"inputs": [{"name": "predict", "shape": [1, len(row)], "datatype": "FP32", "data": row}]}


def _drive(base: str) -> tuple[Tally, Tally, Tally, Tally]:
    versioned, unversioned, invalid, unknown = Tally(), Tally(), Tally(), Tally()
    with client(base) as c:
        for i in range(GOOD):
            r = versioned.send(
                lambda i=i: c.post(
                    f"/v2/models/{MODEL}/versions/{VERSION}/infer", json=_body([5.0 + i / 10, 3, 1.4, 0.2])
                ),
                expect_ok=True,
            )
            assert r.json()["outputs"][0]["shape"] == [1, 1]
            if i < WRONG_SHAPE:  # the model raises: X has 3 features, it expects 4
                versioned.send(
                    lambda: c.post(f"/v2/models/{MODEL}/versions/{VERSION}/infer", json=_body([5.1, 3.5, 1.4])),
                    expect_ok=False,
                )
        for _ in range(GOOD_UNVERSIONED):
            unversioned.send(
                lambda: c.post(f"/v2/models/{MODEL}/infer", json=_body([6.3, 3.3, 6.0, 2.5])), expect_ok=True
            )
        for _ in range(INVALID):
            invalid.send(
                lambda: c.post(f"/v2/models/{MODEL}/versions/{VERSION}/infer", json={"no": "inputs"}), expect_ok=False
            )
        for _ in range(UNKNOWN):
            unknown.send(lambda: c.post("/v2/models/nosuch/infer", json=_body([1.0, 2, 3, 4])), expect_ok=False)
    return versioned, unversioned, invalid, unknown


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    venv = server_venv("mlserver")
    work: Path = tmp_path_factory.mktemp("mlserver")
    subprocess.run([str(venv / "bin" / "python"), "-c", TRAIN, str(work / "model.joblib")], check=True, timeout=120)
    http, grpc, metrics = free_port(), free_port(), free_port()
    settings = {"host": "127.0.0.1", "http_port": http, "grpc_port": grpc, "metrics_port": metrics}
    (work / "settings.json").write_text(json.dumps({**settings, "parallel_workers": 0}))
    model = {"name": MODEL, "implementation": "mlserver_sklearn.SKLearnModel"}
    (work / "model-settings.json").write_text(
        json.dumps({**model, "parameters": {"uri": "./model.joblib", "version": VERSION}})
    )
    server = ServerProcess([str(venv / "bin" / "mlserver"), "start", str(work)], cwd=work, log=work / "mlserver.log")
    try:
        server.start(f"http://127.0.0.1:{http}/v2/models/{MODEL}/versions/{VERSION}/ready", timeout_s=90)
        seen, tallies = observe(
            "mlserver", f"http://127.0.0.1:{metrics}/metrics", lambda: _drive(f"http://127.0.0.1:{http}")
        )
        yield Run(seen, *tallies)
    finally:
        server.stop()


def _requests(run: Run, model: str, version: str, outcome: str) -> float | None:
    return run.seen.sidecar("sidecar_serving_requests_total", model=model, version=version, outcome=outcome)


def test_the_sidecar_detects_mlserver_before_its_first_request(run: Run) -> None:
    """Before any request MLServer writes its families' # TYPE lines and no series: read, with 0 models."""
    assert "model_infer_request_success_total{" not in run.seen.before
    assert run.seen.ready_before.endswith("mlserver profile, 0 models")
    assert run.seen.readiness.endswith("mlserver profile, 3 models")  # iris v1, iris unversioned, nosuch


def test_request_counts_equal_the_clients(run: Run) -> None:
    v = run.versioned
    assert (v.ok, v.failed) == (GOOD, WRONG_SHAPE)
    assert _requests(run, MODEL, VERSION, "success") == v.ok
    assert _requests(run, MODEL, VERSION, "failure") == v.failed
    assert run.seen.sidecar("sidecar_serving_error_ratio", model=MODEL, version=VERSION) == pytest.approx(
        v.failed / v.sent
    )


def test_an_unversioned_request_is_no_version_not_the_string_none(run: Run) -> None:
    """MLServer labels it version="None"; the profile reads that as no version."""
    assert (
        raw_value(run.seen.after, "model_infer_request_success_total", model=MODEL, version="None") == GOOD_UNVERSIONED
    )
    assert _requests(run, MODEL, "", "success") == run.unversioned.ok == GOOD_UNVERSIONED
    assert _requests(run, MODEL, "None", "success") is None


def test_an_unknown_model_is_a_failure_of_its_own_series(run: Run) -> None:
    assert _requests(run, "nosuch", "", "failure") == run.unknown.failed == UNKNOWN


def test_a_body_that_fails_validation_is_counted_nowhere_by_mlserver(run: Run) -> None:
    """A 422 is answered before the data plane: MLServer's model families do not count it, so neither can the
    sidecar; the client's failures exceed the server's by exactly those."""
    assert run.invalid.failed == INVALID
    keys = [(MODEL, VERSION), (MODEL, ""), ("nosuch", "")]
    counted = sum(_requests(run, m, v, o) or 0.0 for m, v in keys for o in ("success", "failure"))
    client = run.versioned.sent + run.unversioned.sent + run.invalid.sent + run.unknown.sent
    assert counted == client - INVALID


def test_latency_average_is_the_servers_sum_over_the_clients_count(run: Run) -> None:
    before, after, labels = run.seen.before, run.seen.after, {"model": MODEL, "version": VERSION}
    count = raw_value(after, "model_infer_request_duration_count", **labels) - raw_value(
        before, "model_infer_request_duration_count", **labels
    )
    total = raw_value(after, "model_infer_request_duration_sum", **labels) - raw_value(
        before, "model_infer_request_duration_sum", **labels
    )
    assert count == run.versioned.sent  # every request that reached the data plane, the failed ones too
    avg = run.seen.sidecar(DURATION, **labels, stat="avg")
    assert avg == pytest.approx(total / count, rel=1e-9)
    client_mean = sum(run.versioned.seconds) / run.versioned.sent
    assert 0 < avg < client_mean  # MLServer times inside the round trip the client timed
    assert run.seen.sidecar(DURATION, **labels, stat="p50") is None  # a Summary without quantiles: average only
