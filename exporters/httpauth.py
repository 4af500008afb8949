"""Credentials and TLS of an exporter's backend, applied to the sidecar's injected httpx client.

Basic auth and bearer tokens go per request (``auth=``), so the shared client carries no exporter's secret.
TLS settings cannot be given per request in httpx, so an exporter with a ``tls`` block gets its own client,
built here with the shared client's timeout and redirect policy, and closes it at shutdown.
"""

from __future__ import annotations

import ssl
from collections.abc import Generator

import httpx
from pydantic import SecretStr

from exporters.config import HttpAuthConfig, TlsConfig

__all__ = ["BearerAuth", "client_for", "request_auth", "ssl_context"]


class BearerAuth(httpx.Auth):
    def __init__(self, token: SecretStr) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
        yield request


def request_auth(cfg: HttpAuthConfig) -> httpx.Auth | httpx._client.UseClientDefault:
    """The ``auth=`` of each request: basic, bearer, or the client's default (none on the shared client)."""
    if cfg.basic_auth is not None:
        return httpx.BasicAuth(cfg.basic_auth.username, cfg.basic_auth.password.get_secret_value())
    if cfg.bearer_token is not None:
        return BearerAuth(cfg.bearer_token)
    return httpx.USE_CLIENT_DEFAULT


def ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    if tls.cert_file is not None:
        ctx.load_cert_chain(str(tls.cert_file), str(tls.key_file) if tls.key_file else None)
    return ctx


def client_for(cfg: HttpAuthConfig, shared: httpx.AsyncClient) -> httpx.AsyncClient:
    """``shared`` unless ``cfg`` has TLS settings; then a client of its own (the caller closes it)."""
    if cfg.tls is None:
        return shared
    return httpx.AsyncClient(
        verify=ssl_context(cfg.tls), timeout=shared.timeout, follow_redirects=shared.follow_redirects
    )
