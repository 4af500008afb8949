"""One bounded GET of a Prometheus exposition, shared by every source that scrapes one (Triton, dcgm-exporter,
the trace failure join).

The body is streamed and cut off at ``max_bytes``, so a runaway target costs bounded memory; every failure is a
``ScrapeError`` with a bounded ``reason`` (timeout, connect, http_status, content_type, too_large) for the
caller's counter.
"""

from __future__ import annotations

import httpx

from sidecar.errors import ScrapeError

__all__ = ["DEFAULT_MAX_BYTES", "fetch_exposition"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_EXPOSITION_TYPES = ("text/plain", "application/openmetrics-text")


async def fetch_exposition(
    http: httpx.AsyncClient,
    url: str,
    *,
    what: str,
    timeout_s: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
    check_content_type: bool = True,
) -> str:
    """The body of ``GET url`` as text; ``what`` names the target in error messages (``Triton``)."""
    try:
        async with http.stream("GET", url, timeout=timeout_s, headers={"Accept": "text/plain;version=0.0.4"}) as resp:
            if resp.status_code != 200:
                raise ScrapeError("http_status", f"{what} answered HTTP {resp.status_code}")
            ctype = resp.headers.get("content-type", "text/plain")
            if check_content_type and not ctype.startswith(_EXPOSITION_TYPES):
                raise ScrapeError("content_type", f"{what} answered {ctype.split(';')[0]}, not a Prometheus exposition")
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise ScrapeError("too_large", f"{what}'s exposition is over {max_bytes} bytes")
    except httpx.TimeoutException:
        raise ScrapeError("timeout", f"{what} did not answer within {timeout_s}s") from None
    except httpx.HTTPError as exc:
        raise ScrapeError("connect", f"cannot reach {what} at {url}: {type(exc).__name__}") from None
    return body.decode("utf-8", errors="replace")
