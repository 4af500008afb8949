"""A real TorchServe 0.12.0 (its Java frontend on Debian's OpenJDK 17, its Python worker) serving a tiny
pure-Python model the test trains, read by the sidecar through the metrics API (``metrics_mode=prometheus``).

No torch: TorchServe's worker imports ``torch`` in one module (``ts/protocol/otf_message_handler.py``, to encode a
tensor response with ``torch.save``) and nowhere on the path of a handler that returns plain lists (pytorch/serve
issue 3350 asks for exactly this). The test puts a two-name stand-in ``torch`` on the worker's PYTHONPATH instead
of torch from PyPI (some GB of CUDA wheels): the frontend, the worker, the handler protocol and the metrics are
TorchServe's own. The model is a nearest-centroid classifier: the centroids of six rows, computed here and archived
with ``torch-model-archiver``; the handler raises on a row of the wrong width (503).

TorchServe counts every request a worker answered (``ts_inference_requests_total``, failures included) and no
outcome per model: the sidecar's requests (outcome ``other``) must equal the client's requests that reached the
model, and its latency and queue averages must be the exposition's own microsecond sums over that count.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from servers.live import Observed, ServerProcess, Tally, client, free_port, observe, raw_value, server_venv

pytestmark = pytest.mark.servers

MODEL, VERSION = "iris", "1.0"
GOOD, GOOD_VERSIONED, WRONG_SHAPE, UNKNOWN = 10, 3, 4, 1
ROWS = [[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, 0.2], [6.2, 2.9, 4.3, 1.3]]
ROWS += [[5.9, 3.0, 5.1, 1.8], [6.3, 3.3, 6.0, 2.5], [5.7, 2.8, 4.1, 1.3]]
LABELS = [0, 0, 1, 2, 2, 1]

TORCH_STUB = '''"""Stand-in for the one `import torch` of TorchServe's worker (ts/protocol/otf_message_handler.py)."""


class Tensor:  # no handler here returns one
    pass


def save(obj, f):
    raise RuntimeError("no torch here: the handler returns plain lists")
'''

HANDLER = """
import json
import os

_centroids = None


def handle(data, context):
    global _centroids
    if _centroids is None:
        with open(os.path.join(context.system_properties["model_dir"], "centroids.json")) as f:
            _centroids = json.load(f)
    if data is None:
        return None
    out = []
    for req in data:
        body = req.get("body") or req.get("data")
        row = (json.loads(body) if isinstance(body, (bytes, bytearray)) else body)["row"]
        if len(row) != len(_centroids[0]):
            raise ValueError(f"a row of {len(row)} features; the model takes {len(_centroids[0])}")
        d = [sum((a - b) ** 2 for a, b in zip(row, c)) for c in _centroids]
        out.append(d.index(min(d)))
    return out
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
    unversioned: Tally  # /predictions/iris: good and wrong-width requests
    versioned: Tally  # /predictions/iris/1.0
    unknown: Tally  # 404: no such model


def _drive(base: str) -> tuple[Tally, Tally, Tally]:
    unversioned, versioned, unknown = Tally(), Tally(), Tally()
    with client(base) as c:
        for i in range(GOOD):
            r = unversioned.send(
                lambda i=i: c.post(f"/predictions/{MODEL}", json={"row": ROWS[i % len(ROWS)]}), expect_ok=True
            )
            assert r.json() == LABELS[i % len(ROWS)]
            if i < WRONG_SHAPE:
                r = unversioned.send(lambda: c.post(f"/predictions/{MODEL}", json={"row": [5.1, 3.5]}), expect_ok=False)
                assert r.status_code == 503  # TorchServe's answer to a handler that raised
        for _ in range(GOOD_VERSIONED):
            versioned.send(lambda: c.post(f"/predictions/{MODEL}/{VERSION}", json={"row": ROWS[0]}), expect_ok=True)
        for _ in range(UNKNOWN):
            r = unknown.send(lambda: c.post("/predictions/nosuch", json={"row": ROWS[0]}), expect_ok=False)
            assert r.status_code == 404
    return unversioned, versioned, unknown


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    venv = server_venv("torchserve")
    work: Path = tmp_path_factory.mktemp("torchserve")
    (work / "stub" / "torch").mkdir(parents=True)
    (work / "stub" / "torch" / "__init__.py").write_text(TORCH_STUB)
    (work / "handler.py").write_text(HANDLER)
    (work / "centroids.json").write_text(json.dumps(_train()))
    (work / "store").mkdir()
    archive = [str(venv / "bin" / "torch-model-archiver"), "--model-name", MODEL, "--version", VERSION]
    archive += ["--handler", "handler.py", "--serialized-file", "centroids.json", "--export-path", "store"]
    subprocess.run(archive, cwd=work, check=True, timeout=60)
    infer, manage, metrics, grpc1, grpc2 = (free_port() for _ in range(5))
    (work / "config.properties").write_text(
        f"inference_address=http://127.0.0.1:{infer}\nmanagement_address=http://127.0.0.1:{manage}\n"
        f"metrics_address=http://127.0.0.1:{metrics}\ngrpc_inference_port={grpc1}\ngrpc_management_port={grpc2}\n"
        "metrics_mode=prometheus\ndefault_workers_per_model=1\ndisable_system_metrics=true\n"
    )
    argv = [str(venv / "bin" / "torchserve"), "--start", "--foreground", "--ncs", "--disable-token-auth"]
    argv += ["--model-store", "store", "--models", f"{MODEL}={MODEL}.mar", "--ts-config", "config.properties"]
    env = {"PYTHONPATH": str(work / "stub"), "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    server = ServerProcess(argv, cwd=work, log=work / "torchserve.log", env=env)
    try:
        # /ping answers before the worker is up; the model's own description says READY once it is.
        server.start_when(
            lambda: '"READY"' in httpx.get(f"http://127.0.0.1:{manage}/models/{MODEL}", timeout=2).text, timeout_s=120
        )
        base = f"http://127.0.0.1:{infer}"
        seen, tallies = observe("ts", f"http://127.0.0.1:{metrics}/metrics", lambda: _drive(base))
        yield Run(seen, *tallies)
    finally:
        server.stop()


def _sidecar(run: Run, name: str, version: str, **labels: str) -> float | None:
    return run.seen.sidecar(name, model=MODEL, version=version, **labels)


def test_the_sidecar_detects_torchserve_before_its_first_request(run: Run) -> None:
    assert "ts_inference_requests_total{" not in run.seen.before
    assert run.seen.ready_before.endswith("torchserve profile, 0 models")
    assert run.seen.readiness.endswith("torchserve profile, 2 models")  # iris unversioned, iris 1.0


def test_requests_received_equal_the_clients_requests_that_reached_the_model(run: Run) -> None:
    u, v = run.unversioned, run.versioned
    assert (u.ok, u.failed, v.ok) == (GOOD, WRONG_SHAPE, GOOD_VERSIONED)
    # TorchServe labels a request naming no version model_version="default": read as no version.
    assert raw_value(run.seen.after, "ts_inference_requests_total", model_version="default") == u.sent
    assert _sidecar(run, "sidecar_serving_requests_total", "", outcome="other") == u.sent
    assert _sidecar(run, "sidecar_serving_requests_total", VERSION, outcome="other") == v.sent
    assert _sidecar(run, "sidecar_serving_error_ratio", "") is None  # no outcome per model: none, not zero
    assert "nosuch" not in run.seen.after and run.unknown.failed == UNKNOWN


def test_latency_and_queue_averages_are_the_servers_sums_over_the_clients_count(run: Run) -> None:
    seen, labels = run.seen, {"model_name": MODEL, "model_version": "default"}

    def delta(sample: str) -> float:
        return raw_value(seen.after, sample, **labels) - raw_value(seen.before, sample, **labels)

    count = delta("ts_inference_requests_total")  # prometheus_client's parser names every counter sample *_total
    assert count == run.unversioned.sent
    e2e = _sidecar(run, "sidecar_serving_gen_ai_server_request_duration_seconds", "", stat="avg")
    queue = _sidecar(run, "sidecar_serving_queue_duration_seconds", "", stat="avg")
    assert e2e == pytest.approx(delta("ts_inference_latency_microseconds_total") * 1e-6 / count, rel=1e-9)
    assert queue == pytest.approx(delta("ts_queue_latency_microseconds_total") * 1e-6 / count, rel=1e-9)
    assert 0 < queue < e2e < sum(run.unversioned.seconds) / count  # queue inside the server's, inside the client's
