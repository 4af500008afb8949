"""What every push and admin route shares: bearer tokens, body limits, decompression and overload refusal.

Each refusal is answered with a 4xx/5xx that says why, and counted in ``sidecar_http_refused_total``.
Decompression is incremental and capped, so a gzip bomb costs at most ``max_body_bytes`` of memory.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import logging
import time
import zlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Literal

from fastapi import HTTPException, Request
from prometheus_client import CollectorRegistry, Counter
from pydantic import SecretStr
from starlette.requests import ClientDisconnect

from sidecar.admission import Admission, rss_bytes
from sidecar.pushfail import PushFailures

__all__ = ["RequestGuard", "rss_bytes"]

Scope = Literal["push", "admin", "read"]


def _set(token: SecretStr | None) -> SecretStr | None:
    return token if token is not None and token.get_secret_value().strip() else None


class RequestGuard:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        max_body_bytes: int,
        push_token: SecretStr | None = None,
        admin_token: SecretStr | None = None,
        read_token: SecretStr | None = None,
        max_inflight: int = 64,
        max_inflight_bytes: int | None = None,
        memory_limit_bytes: int | None = None,
        memory_relief_interval_secs: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        rss: Callable[[], int] = rss_bytes,
        body_timeout_secs: float = 30.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self.body_timeout_secs = body_timeout_secs
        self._log = logger or logging.getLogger("sidecar.http")
        # An empty token is no token: `${env:SIDECAR_PUSH_TOKEN:-}` with the variable unset must leave the
        # endpoint open (Triton's exporter sends no Authorization header), not demand `Bearer ` + nothing.
        self._tokens: dict[Scope, SecretStr | None] = {
            "push": _set(push_token),
            "admin": _set(admin_token),
            "read": _set(read_token),
        }
        self.refused = Counter(
            "sidecar_http_refused",
            "Requests refused, by endpoint and reason.",
            ["endpoint", "reason"],
            registry=registry,
        )
        # Per push endpoint: in-flight requests and body bytes, and the memory limiter (sidecar.admission).
        self.admission = Admission(
            registry,
            self.refuse,
            max_inflight=max_inflight,
            max_inflight_bytes=max_inflight_bytes or 8 * max_body_bytes,
            memory_limit_bytes=memory_limit_bytes,
            relief_interval_secs=memory_relief_interval_secs,
            clock=clock,
            rss=rss,
            logger=self._log,
        )
        # What a push answers when a bus subscriber failed on its batch: one answer for every push endpoint.
        self.push_failures = PushFailures(registry)

    def refuse(
        self, endpoint: str, reason: str, status: int, message: str, headers: dict[str, str] | None = None
    ) -> HTTPException:
        self.refused.labels(endpoint, reason).inc()
        return HTTPException(status_code=status, detail=message, headers=headers)

    def accepted(self, scope: Scope) -> tuple[SecretStr, ...]:
        """The tokens that open ``scope``; empty means the scope is open.

        - push: the push token only (Triton's exporter and CI hold it; it opens nothing else).
        - read: the read token or the admin token (whoever may change the sidecar may look at it); open when no
          read token is set.
        - admin: the admin token; without one, the read token (so a sidecar that asks for a token to read never
          leaves its admin routes open); open when neither is set.
        """
        push, admin, read = self._tokens["push"], self._tokens["admin"], self._tokens["read"]
        if scope == "push":
            return (push,) if push is not None else ()
        if scope == "read":
            return (read, *((admin,) if admin is not None else ())) if read is not None else ()
        if admin is not None:
            return (admin,)
        return (read,) if read is not None else ()

    def requires(self, scope: Scope) -> bool:
        return bool(self.accepted(scope))

    def authorize(self, request: Request, scope: Scope, endpoint: str) -> None:
        tokens = self.accepted(scope)
        if not tokens:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        scheme = scheme.lower()
        if scope == "read" and scheme == "basic":
            # A browser cannot send a bearer token when following a link; Basic lets it ask the person once.
            given = _basic_password(given)
        elif scheme != "bearer":
            given = ""
        raw = given.strip().encode()
        # Every accepted token is compared (no early exit), each in constant time.
        matched = [hmac.compare_digest(raw, t.get_secret_value().encode()) for t in tokens]
        if not raw or not any(matched):
            challenge = 'Basic realm="sidecar", charset="UTF-8"' if scope == "read" else "Bearer"
            raise self.refuse(endpoint, "unauthorized", 401, "missing or wrong token", {"WWW-Authenticate": challenge})

    def admit(self, endpoint: str) -> AbstractAsyncContextManager[None]:
        """One of ``endpoint``'s in-flight slots: 429 over its own budgets, 503 beyond one request while over the
        memory limit (``sidecar.admission``)."""
        return self.admission.admit(endpoint)

    async def read_body(self, request: Request, endpoint: str) -> bytes:
        """The request body, decompressed, never more than ``max_body_bytes`` before or after decompression."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise self.refuse(
                endpoint, "too_large", 413, f"body of {declared} bytes is over the limit of {self.max_body_bytes}"
            )
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout_secs):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise self.refuse(
                            endpoint, "too_large", 413, f"body is over the limit of {self.max_body_bytes} bytes"
                        )
                    self.admission.reserve(endpoint, len(chunk))
                    chunks.append(chunk)
        except TimeoutError:
            # A slow upload holds an in-flight slot; without this a few trickling clients starve every push.
            self._log.warning(
                "%s: body not complete within %.0fs (%d bytes read); answered 408",
                endpoint,
                self.body_timeout_secs,
                size,
            )
            raise self.refuse(
                endpoint,
                "body_timeout",
                408,
                f"request body not complete within {self.body_timeout_secs:g}s",
                {"Connection": "close"},
            ) from None
        except ClientDisconnect:
            self._log.info("%s: client disconnected after %d bytes of its body", endpoint, size)
            raise self.refuse(
                endpoint, "client_disconnect", 400, "client disconnected before its body was read"
            ) from None
        raw = b"".join(chunks)
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            return raw
        if encoding in ("gzip", "x-gzip", "deflate"):
            out = self._inflate(raw, encoding, endpoint)
            self.admission.reserve(endpoint, len(out) - len(raw))
            return out
        raise self.refuse(endpoint, "bad_encoding", 415, f"unsupported Content-Encoding {encoding!r}")

    def _inflate(self, raw: bytes, encoding: str, endpoint: str) -> bytes:
        wbits = 16 + zlib.MAX_WBITS if encoding != "deflate" else zlib.MAX_WBITS
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(raw, self.max_body_bytes + 1)
            if len(out) > self.max_body_bytes or d.unconsumed_tail:
                raise self.refuse(
                    endpoint, "too_large", 413, f"decompressed body is over the limit of {self.max_body_bytes} bytes"
                )
            out += d.flush()
        except zlib.error as exc:
            raise self.refuse(endpoint, "bad_encoding", 400, f"body is not valid {encoding}: {exc}") from None
        if len(out) > self.max_body_bytes:
            raise self.refuse(
                endpoint, "too_large", 413, f"decompressed body is over the limit of {self.max_body_bytes} bytes"
            )
        if not d.eof:
            raise self.refuse(endpoint, "bad_encoding", 400, f"body is truncated {encoding}")
        return out


def _basic_password(encoded: str) -> str:
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[2]
