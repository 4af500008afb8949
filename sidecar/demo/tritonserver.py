"""Starts and stops a real Triton Inference Server from the ``nvidia-pytriton`` wheel (CPU is fine).

Used by ``sidecar demo`` and by the test fixtures. The recipe (backend folder, library path) is the one in
docs/real-components.md: the Python-backend stub links libpython by name, so the running interpreter's LIBDIR
must come first on LD_LIBRARY_PATH or models fail to load with an ``_thread.RLock`` error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from sidecar.errors import SidecarError

__all__ = [
    "DEMO_MODELS",
    "TritonNotAvailable",
    "TritonServer",
    "demo_full_repository",
    "demo_model_file",
    "demo_model_repository",
    "free_port",
    "triton_home",
]

DEMO_REPO = Path(__file__).parent / "model_repository"  # ctr v1+v2, fraud v1: the live tests share these
# What `sidecar demo` adds for its later steps (fraud v2, the streaming chat), kept apart so the live tests'
# Triton (tests/conftest.py) serves exactly the models they count on and starts no extra backend stub.
DEMO_LATER = Path(__file__).parent / "model_repository_later"
DEMO_MODELS = ("ctr", "fraud", "chat")  # every model of the demo's full repository
_NO_CACHE = shutil.ignore_patterns("__pycache__")


class TritonNotAvailable(SidecarError, RuntimeError):
    """The nvidia-pytriton wheel is not installed (install the project's `triton` extra)."""


def demo_model_repository() -> Path:
    return DEMO_REPO


def demo_full_repository(dest: Path) -> Path:
    """The demo's own repository, written to ``dest`` (replaced): ``DEMO_REPO`` with ``DEMO_LATER`` merged in."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(DEMO_REPO, dest, ignore=_NO_CACHE)
    shutil.copytree(DEMO_LATER, dest, ignore=_NO_CACHE, dirs_exist_ok=True)
    return dest


def demo_model_file(model: str, version: str) -> Path:
    """Where a demo model version's ``model.py`` lives (either folder)."""
    later = DEMO_LATER / model / version / "model.py"
    return later if later.exists() else DEMO_REPO / model / version / "model.py"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def triton_home() -> Path:
    try:
        import pytriton
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TritonNotAvailable("nvidia-pytriton is not installed: pip install 'triton-sidecar[triton]'") from exc
    return Path(pytriton.__file__).parent / "tritonserver"


def _prepare_backends(workdir: Path) -> Path:
    home = triton_home()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    dst = workdir / "backends" / "python"
    dst.mkdir(parents=True, exist_ok=True)
    stub = home / "python_backend_stubs" / py / "triton_python_backend_stub"
    for src, name in (
        (home / "backends" / "python" / "libtriton_python.so", "libtriton_python.so"),
        (home / "backends" / "python" / "triton_python_backend_utils.py", "triton_python_backend_utils.py"),
        (stub, "triton_python_backend_stub"),
    ):
        # A Triton started again in the same workdir (after a crash) may find a stub of the last one still
        # running: writing over a running executable fails (ETXTBSY), unlinking it does not.
        (dst / name).unlink(missing_ok=True)
        shutil.copy2(src, dst / name)
    return workdir / "backends"


class TritonServer:
    """One tritonserver process on loopback ports; ``stop()`` kills its whole process group."""

    def __init__(
        self,
        model_repository: Path,
        workdir: Path,
        *,
        extra_args: Sequence[str] = (),
        http_port: int | None = None,
        grpc_port: int | None = None,
        metrics_port: int | None = None,
        summary_latencies: bool = True,
        model_control_explicit: bool = False,
        load_models: Sequence[str] = (),
    ) -> None:
        self.model_repository = Path(model_repository)
        self.workdir = Path(workdir)
        self.extra_args = list(extra_args)
        self.http_port = http_port or free_port()
        self.grpc_port = grpc_port or free_port()
        self.metrics_port = metrics_port or free_port()
        self.summary_latencies = summary_latencies
        self.model_control_explicit = model_control_explicit
        self.load_models = list(load_models)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "tritonserver.log"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def command(self) -> list[str]:
        backends = _prepare_backends(self.workdir)
        cmd = [
            str(triton_home() / "bin" / "tritonserver"),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backends}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            "--allow-gpu-metrics=false",
            "--log-verbose=0",
        ]
        if self.summary_latencies:
            cmd += [
                "--metrics-config",
                "summary_latencies=true",
                "--metrics-config",
                "summary_quantiles=0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001",
            ]
        if self.model_control_explicit:
            cmd.append("--model-control-mode=explicit")
            cmd += [f"--load-model={m}" for m in self.load_models]
        return cmd + self.extra_args

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        home = triton_home()
        libs = [str(sysconfig.get_config_var("LIBDIR")), str(home.parent.parent / "nvidia_pytriton.libs")]
        if env.get("LD_LIBRARY_PATH"):
            libs.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = ":".join(libs)
        # The stub embeds an interpreter that must import numpy: put this interpreter's bin/ first.
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        return env

    def start(self, timeout_s: float = 120.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True
        )
        log.close()
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"tritonserver exited with {self.proc.returncode}; see {self.log_path}:\n" + self.log_tail()
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.http_url}/v2/health/ready", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"tritonserver not ready after {timeout_s}s; see {self.log_path}:\n" + self.log_tail())

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

    def kill(self) -> None:
        """Crash it (SIGKILL to the whole group), as an OOM kill would."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> TritonServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
