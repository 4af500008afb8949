"""A real nginx with ``proxy_cache`` in front of the demo's Triton, when nginx is installed (``.ci/setup`` installs
Debian's), logging one JSON line per request in the format docs/edge.md gives; the demo's sidecar tails that log
with the edge source. The demo's traffic goes through it, and each request's ``traceparent`` is logged too, so a
trace's waterfall shows the edge hop in front of Triton's spans.

The demo's nginx caches inference POSTs too (``cache_posts``): the key holds the method, the URI and the request
body, and the body must be in memory for ``$request_body`` to hold it, so ``client_body_buffer_size`` and
``client_max_body_size`` are the same (a larger body is refused with 413 rather than cached under an empty body).
The demo's repeated lookups are then cache hits, which never reach Triton: the edge source's hit ratio on ``/``
is real, and Triton's own counts (the sidecar's SLIs) are of the requests it served.

``nginx_conf`` is the one config builder: the real-nginx edge test uses it as well.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from sidecar.demo.tritonserver import free_port

__all__ = ["DEMO_HIT_RATIO_TARGET", "LOG_FORMAT", "POST_CACHE_KEY", "DemoNginx", "edge_config", "nginx_conf"]

# Every figure the edge source's default field names read (docs/edge.md, "The edge source").
LOG_FORMAT = (
    '\'{"time":$msec,"path":"$uri","cache":"$upstream_cache_status","request_time":$request_time,'
    '"upstream_time":"$upstream_response_time","status":$status,"node":"NODE",'
    '"request_id":"$request_id","trace_id":"$http_traceparent"}\''
)


POST_CACHE_KEY = '"$request_method|$request_uri|$request_body"'
BODY_BUFFER = "64k"


def nginx_conf(
    root: Path, *, port: int, origin: str, node: str, cache_key: str = "$uri", cache_posts: bool = False
) -> str:
    """An nginx config: ``proxy_cache`` on ``root/cache`` in front of ``origin`` (``host:port``), listening on
    loopback ``port``, logging JSON to ``root/logs/access.log``, every other file under ``root``. By default
    nginx caches GET and HEAD responses only (inference requests are POSTs: they go to the origin and log no cache
    status); ``cache_posts`` caches POSTs too, keyed on their body (``POST_CACHE_KEY``)."""
    posts = ""
    if cache_posts:
        cache_key = POST_CACHE_KEY
        posts = (
            f"proxy_cache_methods GET HEAD POST; client_body_buffer_size {BODY_BUFFER}; "
            f"client_max_body_size {BODY_BUFFER};"
        )
    user = "user root;" if os.geteuid() == 0 else ""  # a root master's workers must write root's cache dir
    return f"""{user}
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format edge escape=json {LOG_FORMAT.replace("NODE", node)};
    access_log {root}/logs/access.log edge;
    client_body_temp_path {root}/body; proxy_temp_path {root}/proxy; fastcgi_temp_path {root}/fcgi;
    uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
    proxy_cache_path {root}/cache levels=1:2 keys_zone=edge:1m max_size=64m inactive=1h use_temp_path=off;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{origin};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache edge;
            proxy_cache_key {cache_key};
            {posts}
            proxy_cache_valid 200 1h;
            add_header X-Cache $upstream_cache_status always;
        }}
    }}
}}
"""


# The demo's hit-ratio SLA: its repeated lookups are 5 of ~25 requests a second (a ~20% hit ratio), so the
# target is one the demo meets; the SLA line on / then shows a real ratio, burn rates and the projection.
DEMO_HIT_RATIO_TARGET = 0.15


def edge_config(access_log: Path) -> dict[str, Any]:
    """The demo config's ``edge`` section for the nginx above: its log tailed, inference as its own group, and
    the hit-ratio SLA at a target the demo's traffic meets (``DEMO_HIT_RATIO_TARGET``)."""
    return {
        "enabled": True,
        "source": {"files": [{"path": str(access_log)}]},
        "series": {"route_groups": [{"name": "infer", "regex": r"^/v2/models/[^/]+(/versions/[^/]+)?/infer$"}]},
        "checks": {"sla": {"target": DEMO_HIT_RATIO_TARGET}},
    }


class DemoNginx:
    def __init__(self, workdir: Path, origin: str, *, node: str = "nginx-demo") -> None:
        self.binary = shutil.which("nginx")
        self.workdir = workdir
        self.origin = origin.removeprefix("http://").rstrip("/")
        self.node = node
        self.port = free_port()
        self.pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.workdir / "logs" / "access.log"

    def start(self, timeout_s: float = 20.0) -> bool:
        """False (and nothing running) when nginx is not installed or did not come up."""
        if self.binary is None:
            return False
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "nginx.conf"
        conf.write_text(nginx_conf(self.workdir, port=self.port, origin=self.origin, node=self.node, cache_posts=True))
        # Without `daemon off` the command returns once the master has bound its port and gone to the background.
        done = subprocess.run(
            [self.binary, "-p", str(self.workdir), "-c", str(conf)], capture_output=True, timeout=timeout_s
        )
        if done.returncode != 0:
            return False
        self.pid = int((self.workdir / "nginx.pid").read_text())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/v2/health/ready", timeout=1).status_code < 500:
                    return True
            time.sleep(0.2)
        self.stop()
        return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to the master (nginx's fast shutdown), then wait until it is gone, workers included: the master
        exits after its workers. The master is not our child (nginx daemonizes), so it is polled."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # raises once the master is gone
                time.sleep(0.05)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
