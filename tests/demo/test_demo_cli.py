"""`sidecar demo` as a user runs it: a real Triton, traffic, the sidecar; Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from waiting import wait_until

from sidecar.demo.tritonserver import free_port

pytestmark = pytest.mark.triton


def pids_under(workdir: Path) -> list[int]:
    """Processes whose command line mentions the demo's work folder (Triton and its backend stubs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(workdir) in cmd:
            found.append(int(entry.name))
    return found


def edge_line_and_hop(http: httpx.Client, base: str) -> bool:
    """An inference line of the demo's nginx counted, and a trace whose waterfall has the edge hop in front."""
    if 'route_group="infer"' not in http.get(f"{base}/metrics", timeout=2).text:
        return False
    listed = http.get(f"{base}/traces?all=1", timeout=5).text
    ids = list(dict.fromkeys(re.findall(r"/traces/([0-9a-f]{32})", listed)))[:5]
    return any('id="edge-bar"' in http.get(f"{base}/traces/{t}", timeout=5).text for t in ids)


def streams_probes_and_hits(http: httpx.Client, base: str, edge: bool) -> bool:
    """chat's streams judged by the goodput check, a passing probe of every probed version, and (behind nginx)
    repeated lookups answered from the edge's cache."""
    text = http.get(f"{base}/metrics", timeout=2).text
    probed = all(
        f'sidecar_probe_requests_total{{model="{m}",result="ok",version="{v}"}}' in text
        for m in ("ctr", "fraud")
        for v in ("1", "2")
    )
    hit = 'sidecar_edge_requests_total{cache="hit",edge_node="nginx-demo",route_group="infer"' in text
    return (
        'sidecar_goodput_requests_total{good="true",model="chat",version="1"}' in text and probed and (hit or not edge)
    )


@pytest.fixture(scope="module")
def timed_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``sidecar demo --duration-secs 5`` with no work folder (TMPDIR points at a folder of its own), started when
    the module starts so that it runs beside the Ctrl-C test: each demo has its own Triton, ports and folder, and
    their start-ups, scenarios and stops (about 20 s each) overlap instead of adding up."""
    tmp = tmp_path_factory.mktemp("demo-timed")
    tmpdir = tmp / "tmp"
    tmpdir.mkdir()
    port = free_port()
    exe = Path(sys.executable).parent / "sidecar"
    with (tmp / "stdout").open("w") as out, (tmp / "stderr").open("w") as err:
        proc = subprocess.Popen(
            [str(exe), "demo", "--port", str(port), "--duration-secs", "5"],
            env={**os.environ, "TMPDIR": str(tmpdir)},
            stdout=out,
            stderr=err,
            text=True,
        )
    try:
        yield {"proc": proc, "port": port, "tmpdir": tmpdir, "stdout": tmp / "stdout", "stderr": tmp / "stderr"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.usefixtures("timed_demo")  # starts the other test's demo now, to run beside this one
def test_demo_serves_slis_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    exe = Path(sys.executable).parent / "sidecar"
    proc = subprocess.Popen(
        [str(exe), "demo", "--port", str(port), "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    # One client for every poll: httpx.get builds one per call, about 50 ms of CPU each (its TLS context), and
    # the edge poll's seven gets twice a second took most of a core from the demo it waits for.
    http = httpx.Client()

    def derived_metrics() -> str:
        assert proc.poll() is None, "".join(lines)
        text = http.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        return text if 'sidecar_model_requests_per_second{model="fraud"' in text else ""

    try:
        metrics = wait_until(derived_metrics, 90, interval_s=0.25, ignore=(httpx.HTTPError,)) or ""
        assert 'sidecar_model_requests_per_second{model="ctr",version="2"}' in metrics, "".join(lines)
        assert "sidecar_triton_up 1.0" in metrics
        assert pids_under(tmp_path), "Triton should be running under the demo's folder"
        # The streaming model, the probes and (behind nginx) the edge cache: all live within seconds.
        edge = shutil.which("nginx") is not None
        base = f"http://127.0.0.1:{port}"
        assert wait_until(
            lambda: streams_probes_and_hits(http, base, edge), 60, interval_s=0.5, ignore=(httpx.HTTPError,)
        )
        assert "Actions:  dry-run" in "".join(lines)
        if edge:  # the traffic goes through the demo's nginx; the sidecar tails its log
            assert wait_until(lambda: edge_line_and_hop(http, base), 60, interval_s=0.5, ignore=(httpx.HTTPError,))
            assert "Edge:     nginx http://127.0.0.1:" in "".join(lines)
        # The banner names the config it wrote and the doctor command; that command works against this demo.
        config = tmp_path / "sidecar.yaml"
        assert f"{exe} doctor --config {config}" in "".join(lines)
        doctor = subprocess.run(
            [str(exe), "doctor", "--config", str(config), "--wait-secs", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert doctor.returncode in (0, 1), doctor.stdout + doctor.stderr  # 2: "cannot run"
        assert doctor.stdout.strip() and "Traceback" not in doctor.stderr
        http.close()  # no connection of this test's left open while the sidecar shuts down
        # An impatient user presses Ctrl-C twice: still a graceful stop, the sidecar's shutdown included.
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        http.close()
        if proc.poll() is None:
            proc.kill()
    reader.join(5)
    out = "".join(lines)
    assert f"http://127.0.0.1:{port}/metrics" in out
    assert "stopped Triton and the sidecar" in out
    assert re.search(r"streams: [1-9]\d* \(0 failed\)", out), out
    assert "What the banner promised, and what happened" in out  # Ctrl-C still prints the promise table
    assert "Traceback" not in out, out
    assert pids_under(tmp_path) == [], "the demo left processes behind"
    assert os.path.exists(tmp_path / "sidecar-state.sqlite")


def test_demo_names_its_alerts_and_removes_its_temporary_folder(timed_demo: dict[str, Any]) -> None:
    from sidecar.demo.story import EXPECTED

    port, tmp_path = timed_demo["port"], timed_demo["tmpdir"]
    returncode = timed_demo["proc"].wait(timeout=180)
    stdout, stderr = timed_demo["stdout"].read_text(), timed_demo["stderr"].read_text()
    assert returncode == 0, stdout + stderr
    for a in EXPECTED:  # every alert the scenario causes is announced before it happens, and judged at the end
        assert a.describe() in stdout
        assert f"[not yet] {a.promise()} (the demo stopped at +0:0" in stdout
    assert f"http://127.0.0.1:{port}/alerts" in stdout and "#/alerts" not in stdout
    assert "removed" in stdout and list(tmp_path.glob("sidecar-demo-*")) == []
