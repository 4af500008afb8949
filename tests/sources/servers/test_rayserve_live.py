"""A real Ray Serve 2.60.0 (a local Ray cluster: GCS, raylet, the metrics agent, the Serve controller, proxy and
one replica) serving a tiny pure-Python model the test trains, read by the sidecar on Ray's metrics export port.

The model is a nearest-centroid classifier: the centroids of six rows, computed here and passed to the
deployment. The client sends good rows, rows of the wrong width (the deployment raises: 500) and a request to a
route no application serves (404, answered by the proxy: no replica sees it). Ray's replicas report their metrics
to the node's metrics agent on an interval (0.5 s here, ``metrics_report_interval_ms``), so the test waits, by
polling the exposition, until the counts settle before the sidecar's second scrape. For the same reason the
replica's families are not exported yet when ``serve.run`` returns (in one of two probe runs the replica's gauge came
0.4 s after, the request counter and latency histogram only after the first request): the server is ready when the
exposition holds the replica's ``ray_serve_replica_processing_queries``.

This is the slowest module of the real servers: a Ray cluster and Serve's actors take about 30 s to come up on a
loaded 2-core host (docs/tested.md has the figures).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
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

DEPLOYMENT, APP = "Iris", "iris"
GOOD, WRONG_SHAPE, UNKNOWN = 12, 4, 1
ROWS = [[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, 0.2], [6.2, 2.9, 4.3, 1.3]]
ROWS += [[5.9, 3.0, 5.1, 1.8], [6.3, 3.3, 6.0, 2.5], [5.7, 2.8, 4.1, 1.3]]
LABELS = [0, 0, 1, 2, 2, 1]

APP_PY = """
import json
import signal
import sys
import threading

import ray
from ray import serve
from starlette.requests import Request

metrics_port, http_port = int(sys.argv[1]), int(sys.argv[2])
with open(sys.argv[3]) as f:
    centroids = json.load(f)


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0})
class Iris:
    def __init__(self, centroids):
        self.centroids = centroids

    async def __call__(self, request: Request) -> int:
        row = (await request.json())["row"]
        if len(row) != len(self.centroids[0]):
            raise ValueError(f"a row of {len(row)} features; the model takes {len(self.centroids[0])}")
        d = [sum((a - b) ** 2 for a, b in zip(row, c)) for c in self.centroids]
        return d.index(min(d))


stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
ray.init(
    address="local",  # a cluster of its own, never one another run left in /tmp/ray/ray_current_cluster
    num_cpus=2,
    include_dashboard=False,
    _metrics_export_port=metrics_port,
    _system_config={"metrics_report_interval_ms": 500},
)
serve.start(http_options={"host": "127.0.0.1", "port": http_port})
serve.run(Iris.bind(centroids), name="iris", route_prefix="/iris")
print("serving", flush=True)
stop.wait()
ray.shutdown()
"""


def _train() -> list[list[float]]:
    """Nearest-centroid: each class's mean row."""
    out = []
    for k in sorted(set(LABELS)):
        rows = [r for r, y in zip(ROWS, LABELS, strict=True) if y == k]
        out.append([sum(col) / len(rows) for col in zip(*rows, strict=True)])
    return out


@dataclass
class Run:
    seen: Observed
    reached: Tally  # good and wrong-width requests: the replica ran them
    unknown: Tally  # 404 from the proxy


def _drive(base: str) -> tuple[Tally, Tally]:
    reached, unknown = Tally(), Tally()
    with client(base) as c:
        for i in range(GOOD):
            r = reached.send(lambda i=i: c.post("/iris", json={"row": ROWS[i % len(ROWS)]}), expect_ok=True)
            assert r.json() == LABELS[i % len(ROWS)]
            if i < WRONG_SHAPE:
                r = reached.send(lambda: c.post("/iris", json={"row": [5.1, 3.5]}), expect_ok=False)
                assert r.status_code == 500
        for _ in range(UNKNOWN):
            r = unknown.send(lambda: c.post("/nosuch", json={"row": ROWS[0]}), expect_ok=False)
            assert r.status_code == 404
    return reached, unknown


def _counts(text: str) -> tuple[float, float, float]:
    """Successes, errors and latency observations of the deployment in one exposition (summed over series)."""
    from prometheus_client.parser import text_string_to_metric_families

    want = {
        "ray_serve_deployment_request_counter_total": 0,
        "ray_serve_deployment_error_counter_total": 1,
        "ray_serve_deployment_processing_latency_ms_count": 2,
    }
    out = [0.0, 0.0, 0.0]
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in want and s.labels.get("deployment") == DEPLOYMENT:
                out[want[s.name]] += s.value
    return out[0], out[1], out[2]


def _has(text: str, sample: str) -> bool:
    """A sample of the deployment in the exposition (read with ``prometheus_client``'s parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    return any(
        s.name == sample and s.labels.get("deployment") == DEPLOYMENT
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    venv = server_venv("rayserve")
    work: Path = tmp_path_factory.mktemp("rayserve")
    (work / "app.py").write_text(APP_PY)
    (work / "centroids.json").write_text(json.dumps(_train()))
    metrics, http = free_port(), free_port()
    argv = [str(venv / "bin" / "python"), "app.py", str(metrics), str(http), "centroids.json"]
    env = {"RAY_USAGE_STATS_ENABLED": "0"}
    server = ServerProcess(argv, cwd=work, log=work / "ray.log", env=env)
    try:
        base, metrics_url = f"http://127.0.0.1:{http}", f"http://127.0.0.1:{metrics}/metrics"

        def reported() -> bool:
            """``serve.run`` returned and the metrics agent exports the replica's first report: before that the
            exposition may hold no family of the replica (a fresh-clone CI run scraped 129 families, none of them)."""
            if "serving" not in server.log_tail(5):
                return False
            text = httpx.get(metrics_url, timeout=5).text
            return _has(text, "ray_serve_replica_processing_queries")

        server.start_when(reported, timeout_s=180, what="ray serve and its replica's metrics")

        def settled(text: str, got: tuple[Tally, Tally]) -> bool:
            return _counts(text) == (GOOD, WRONG_SHAPE, GOOD + WRONG_SHAPE)

        seen, tallies = observe("ray", metrics_url, lambda: _drive(base), settled=settled)
        yield Run(seen, *tallies)
    finally:
        server.stop(timeout_s=10)


def _sidecar(run: Run, name: str, **labels: str) -> float | None:
    return run.seen.sidecar(name, model=DEPLOYMENT, version="", **labels)


def test_the_sidecar_detects_ray_serve(run: Run) -> None:
    assert run.seen.readiness.endswith("rayserve profile, 1 models")
    # Before the first request: the router's and the replica's gauges, no request counter yet.
    assert run.seen.ready_before.endswith("rayserve profile, 1 models")
    assert "ray_serve_deployment_request_counter_total" not in run.seen.before


def test_the_router_queue_is_the_waiting_gauge(run: Run) -> None:
    assert "ray_serve_deployment_queued_queries" in run.seen.after
    assert _sidecar(run, "sidecar_serving_requests_waiting") == 0


def test_request_counts_equal_the_clients(run: Run) -> None:
    r = run.reached
    assert (r.ok, r.failed) == (GOOD, WRONG_SHAPE)
    # One or the other per query: the request counter is the successes, the error counter the failures.
    assert _sidecar(run, "sidecar_serving_requests_total", outcome="success") == r.ok
    assert _sidecar(run, "sidecar_serving_requests_total", outcome="failure") == r.failed
    assert _sidecar(run, "sidecar_serving_error_ratio") == pytest.approx(r.failed / r.sent)
    assert (
        raw_value(run.seen.after, "ray_serve_deployment_error_counter_total", exception_type="ValueError") == r.failed
    )


def test_a_route_no_application_serves_is_counted_by_the_proxy_only(run: Run) -> None:
    assert run.unknown.failed == UNKNOWN
    assert raw_value(run.seen.after, "ray_serve_num_http_requests_total", route="/nosuch") == 0  # not even a route
    assert _counts(run.seen.after)[2] == run.reached.sent


def test_compute_average_is_the_servers_sum_over_the_clients_count(run: Run) -> None:
    seen, fam = run.seen, "ray_serve_deployment_processing_latency_ms"
    count = raw_value(seen.after, f"{fam}_count", deployment=DEPLOYMENT) - raw_value(
        seen.before, f"{fam}_count", deployment=DEPLOYMENT
    )
    total = raw_value(seen.after, f"{fam}_sum", deployment=DEPLOYMENT) - raw_value(
        seen.before, f"{fam}_sum", deployment=DEPLOYMENT
    )
    assert count == run.reached.sent
    avg = _sidecar(run, "sidecar_serving_compute_duration_seconds", stat="avg")
    assert avg == pytest.approx(total / 1000 / count, rel=1e-9)  # milliseconds in Ray, seconds in the schema
    assert 0 < avg < sum(run.reached.seconds) / run.reached.sent
    after = raw_buckets(seen.after, fam, deployment=DEPLOYMENT)
    before = raw_buckets(seen.before, fam, deployment=DEPLOYMENT)
    lower, upper = bucket_of(after, before, count / 2)
    p50 = _sidecar(run, "sidecar_serving_compute_duration_seconds", stat="p50")
    assert p50 is not None and lower / 1000 <= p50 <= upper / 1000


def test_nothing_is_in_flight_after_the_traffic(run: Run) -> None:
    assert _sidecar(run, "sidecar_serving_requests_in_flight") == 0
