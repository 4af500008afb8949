"""The real app under uvicorn in a thread on a free loopback port, for tests that need a real socket (a browser, a
real Triton or Prometheus sending to it); stopped even when the test fails."""

from __future__ import annotations

import threading
from typing import Any

import uvicorn
from waiting import wait_until

from sidecar.demo.tritonserver import free_port


class AppServer:
    def __init__(self, app: Any, *, port: int | None = None, **config: Any) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", **config)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> str:
        self.thread.start()
        if not wait_until(lambda: self.server.started or not self.thread.is_alive(), 20) or not self.server.started:
            raise RuntimeError("the app did not start")
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(15)

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
