"""A Triton started again in the same workdir (``bench_overhead`` restarts one that crashed) must not trip over
the Python-backend stub of the one before still running: copying over a running executable fails with ETXTBSY."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from sidecar.demo.tritonserver import TritonNotAvailable, _prepare_backends, triton_home


def test_backends_prepared_again_while_the_old_stub_still_runs(tmp_path):
    try:
        home = triton_home()
    except TritonNotAvailable:
        pytest.skip("nvidia-pytriton is not installed")
    backends = _prepare_backends(tmp_path)
    stub = backends / "python" / "triton_python_backend_stub"
    # A running program where the stub lies: the situation a crashed Triton's leftover stub process leaves.
    shutil.copy2(shutil.which("sleep") or "/bin/sleep", stub)
    proc = subprocess.Popen([str(stub), "30"])
    try:
        with pytest.raises(OSError) as busy:  # what a plain copy over it does
            shutil.copy2(sys.executable, stub)
        assert busy.value.errno == 26  # ETXTBSY
        assert _prepare_backends(tmp_path) == backends
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        assert stub.read_bytes() == (home / "python_backend_stubs" / py / "triton_python_backend_stub").read_bytes()
        assert proc.poll() is None  # the old process is left alone
    finally:
        proc.kill()
        proc.wait()
