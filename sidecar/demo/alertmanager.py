"""A real Alertmanager (Debian's ``prometheus-alertmanager``) for the demo, when it is installed."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path

import httpx

from sidecar.demo.tritonserver import free_port

__all__ = ["DemoAlertmanager"]

_CONFIG = """\
# The demo's Alertmanager: it groups and shows alerts; it sends nowhere.
route:
  receiver: demo
  group_by: [alertname, model]
  group_wait: 5s
  group_interval: 30s
  repeat_interval: 1h
receivers:
  - name: demo
"""


class DemoAlertmanager:
    def __init__(self, workdir: Path) -> None:
        self.binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> bool:
        if self.binary is None:
            return False
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "alertmanager.yml"
        cfg.write_text(_CONFIG)
        log = open(self.workdir / "alertmanager.log", "ab")  # noqa: SIM115 - kept open for the child
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"--config.file={cfg}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return True
            time.sleep(0.2)
        self.stop()
        return False

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
