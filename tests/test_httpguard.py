"""The request guard's bearer tokens: an empty token means "no token", and a blank bearer never passes."""

from __future__ import annotations

from fastapi import HTTPException
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from starlette.requests import Request

from sidecar.httpguard import RequestGuard


def _request(auth: str | None) -> Request:
    headers = [(b"authorization", auth.encode())] if auth is not None else []
    return Request({"type": "http", "method": "POST", "path": "/v1/traces", "headers": headers})


def _guard(token: str | None) -> RequestGuard:
    return RequestGuard(
        CollectorRegistry(), max_body_bytes=1024, push_token=SecretStr(token) if token is not None else None
    )


def _allowed(guard: RequestGuard, auth: str | None) -> bool:
    try:
        guard.authorize(_request(auth), "push", "/v1/traces")
    except HTTPException as exc:
        assert exc.status_code == 401
        return False
    return True


def test_an_empty_token_is_unset_so_a_client_without_a_header_is_let_in() -> None:
    # ${env:SIDECAR_PUSH_TOKEN:-} with the variable unset yields "": Triton sends no Authorization header.
    for token in ("", "   "):
        assert _allowed(_guard(token), None)


def test_a_blank_bearer_never_matches_a_set_token() -> None:
    g = _guard("s3cret")
    assert not _allowed(g, "Bearer ")
    assert not _allowed(g, "Bearer")
    assert not _allowed(g, None)
    assert not _allowed(g, "Bearer s3cre")
    assert _allowed(g, "Bearer s3cret")
    assert _allowed(g, "bearer s3cret")
