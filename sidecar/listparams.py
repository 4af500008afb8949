"""One rule for the query parameters of every GET list API (``/v1/changes``, ``/v1/audit``, ``/v1/alerts``,
``/v1/audit/dead_letters``).

- An unknown parameter is refused (400), naming it and the ones allowed; so is a parameter given twice.
- ``limit`` is an integer from 1 to the route's maximum; anything else is refused (400), never clamped.
- A text filter (a model, a version, an id) is any Unicode text of 1 to ``MAX_TEXT`` characters: what
  ``POST /v1/events`` and ``POST /v1/changes`` accept can be filtered on. Values reach SQL only as bound
  parameters, never in the statement's text.

Every refusal is counted in ``sidecar_api_queries_refused_total{route,reason}``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from fastapi import HTTPException, Request
from prometheus_client import CollectorRegistry, Counter

from sidecar.errors import ListParamError

__all__ = ["MAX_LIMIT", "MAX_TEXT", "ListParamError", "ListParams", "ListQuery", "check", "finite", "text"]

MAX_LIMIT = 1000
MAX_TEXT = 200
_ATTR = "_sidecar_list_params"


@dataclass(frozen=True)
class ListQuery:
    params: dict[str, str]  # every parameter given, once each
    limit: int | None  # None: the route's default was None and no limit was given


def check(
    items: Iterable[tuple[str, str]],
    allowed: Collection[str],
    *,
    default_limit: int | None = 100,
    max_limit: int = MAX_LIMIT,
) -> ListQuery:
    """The rule above over ``items`` (every name and value as sent, repeats included); ``allowed`` excludes
    ``limit``, which every list route takes."""
    names = {*allowed, "limit"}
    params: dict[str, str] = {}
    unknown: list[str] = []
    for k, v in items:
        if k not in names:
            unknown.append(k[:40])
        elif k in params:
            raise ListParamError("repeated", f"{k}: given twice")
        else:
            params[k] = v
    if unknown:
        raise ListParamError(
            "unknown_parameter",
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown[:5]))} "
            f"(allowed: {', '.join(sorted(names))})",
        )
    limit = default_limit
    if "limit" in params:
        raw = params["limit"]
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= max_limit:
            raise ListParamError("limit", f"limit: an integer from 1 to {max_limit}, got {raw[:40]!r}")
        limit = int(raw)
    return ListQuery(params, limit)


def text(name: str, raw: str) -> str:
    """A text filter: any Unicode of 1 to ``MAX_TEXT`` characters."""
    if not 1 <= len(raw) <= MAX_TEXT:
        raise ListParamError("value", f"{name}: 1 to {MAX_TEXT} characters expected, got {len(raw)}")
    return raw


def finite(name: str, raw: str) -> float:
    """A finite number (Unix seconds, say)."""
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise ListParamError("value", f"{name}: a finite number expected, got {raw[:40]!r}")
    return v


class ListParams:
    """The rule as FastAPI routes use it: refusals counted and answered 400 (``{"detail": message}``). One per
    registry: ``ListParams.of(registry)``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._refused = Counter(
            "sidecar_api_queries_refused",
            "GET list API requests answered 400, by route and reason (unknown_parameter, repeated, limit, value).",
            ["route", "reason"],
            registry=registry,
        )

    @classmethod
    def of(cls, registry: CollectorRegistry) -> ListParams:
        lp = getattr(registry, _ATTR, None)
        if not isinstance(lp, ListParams):
            lp = cls(registry)
            setattr(registry, _ATTR, lp)
        return lp

    def refuse(self, route: str, exc: ListParamError) -> HTTPException:
        self._refused.labels(route, exc.reason).inc()
        return HTTPException(status_code=400, detail=str(exc))

    def parse(
        self,
        route: str,
        request: Request,
        allowed: Collection[str],
        *,
        default_limit: int | None = 100,
        max_limit: int = MAX_LIMIT,
    ) -> ListQuery:
        try:
            return check(request.query_params.multi_items(), allowed, default_limit=default_limit, max_limit=max_limit)
        except ListParamError as exc:
            raise self.refuse(route, exc) from None
