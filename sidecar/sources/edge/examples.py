"""``edge:`` sections for common edges, each tested on lines built from the edge's documented log fields
(tests/sources/edge/test_edge_cdn_examples.py) and quoted in docs/edge.md.

- nginx: the JSON ``log_format`` in docs/edge.md (the defaults of ``edge.source.fields``).
- CloudFront: standard logging (v2) delivered as JSON: ``date`` + ``time`` (UTC), ``x-edge-location``,
  ``cs-uri-stem``, ``sc-status``, ``x-edge-result-type`` (Hit, RefreshHit, Miss, Error, Redirect,
  LimitExceeded, CapacityExceeded), ``time-taken`` (seconds), ``origin-lbl`` (seconds, ``-`` without origin
  fetch), ``x-edge-request-id`` (an opaque id, far wider than a trace id).
- Fastly: a JSON log format in the style of Fastly's documented default for HTTPS/New Relic endpoints:
  ``timestamp`` (``%{begin:%Y-%m-%dT%H:%M:%S}t``, UTC), ``time_elapsed`` (``time.elapsed.usec``), ``url``,
  ``cache_status`` (``fastly_info.state`` reduced to HIT, MISS, PASS, ERROR, PIPE, SYNTH), plus ``pop``
  (``server.datacenter``), ``status`` (``resp.status``) and ``request_id`` (``req.xid``). Fastly logs no origin
  latency by default, so the origin hop stays empty.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CDN_EXAMPLES"]

CDN_EXAMPLES: dict[str, dict[str, Any]] = {
    "nginx": {
        "enabled": True,
        "source": {"files": [{"path": "/var/log/nginx/edge.json"}]},
    },
    "cloudfront": {
        "enabled": True,
        "source": {
            "unknown_fields": "ignore",
            "max_string_length": 1024,
            "max_age_secs": 2 * 86_400,  # CloudFront may deliver log lines up to a day late
            "fields": {
                "date": "date",
                "time": "time",
                "path": "cs-uri-stem",
                "cache_status": "x-edge-result-type",
                "edge_latency": "time-taken",
                "origin_latency": "origin-lbl",
                "status": "sc-status",
                "node": "x-edge-location",
                "trace_id": None,
                "request_id": "x-edge-request-id",
            },
        },
        "series": {
            "hit_statuses": ["Hit", "RefreshHit"],
            "excluded_statuses": ["", "Error", "Redirect", "LimitExceeded", "CapacityExceeded"],
        },
    },
    "fastly": {
        "enabled": True,
        "source": {
            "unknown_fields": "ignore",
            "fields": {
                "time": "timestamp",
                "path": "url",
                "cache_status": "cache_status",
                "edge_latency": "time_elapsed",
                "edge_latency_unit": "us",
                "origin_latency": None,
                "status": "status",
                "node": "pop",
                "trace_id": "traceparent",
                "request_id": "request_id",
            },
        },
        "series": {
            "hit_statuses": ["HIT", "HIT-STALE"],
            "excluded_statuses": ["", "PASS", "PIPE", "ERROR", "SYNTH"],
        },
    },
}
