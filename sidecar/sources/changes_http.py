"""``POST /v1/changes``: deploys and other changes posted by CI, published on the bus (kind ``changes``).

A change is recorded once. Its id (the idempotency key) is, in this order: the item's ``id``; the request's
``Idempotency-Key`` header (item ``i`` of a list gets ``KEY#i``); with ``at`` given, a hash of the fields and
``at``. A change with none of these is a retry of an equal one (every field) posted over the API in the last
``idempotency_window_secs``, else new with a hash of its fields and the time received. A retry is answered 200
with the first one's id and stores nothing; a key already used for a different change is refused (422).

Answers 201 ``{"ids": [...]}`` once the change log has stored the request's new changes; 200 when all were
already recorded; 400 naming the field for a body that is not one change object or a list of them; 413 for
more than 1000; 415 for a Content-Type other than JSON (none is read as JSON); 422 for a reused key; 500 naming
the subscriber when one failed on them, the change log included (it then stored nothing: send it again;
``sidecar.pushfail``); 503 when the store cannot be read; 401/429/503/415 from the request guard. A refused
request stores nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter
from pydantic import Field, ValidationError, field_validator, model_validator

from sidecar.clock import Clock
from sidecar.component import Bus, Passive, Role
from sidecar.configbase import StrictModel
from sidecar.httpguard import RequestGuard
from sidecar.model import Batch, Change
from sidecar.purge import purge_what
from sidecar.sources.media import JSON, media_type
from sidecar.state.changes import derived_id
from sidecar.state.changes_config import ChangesConfig
from sidecar.timerange import check_unix_seconds

__all__ = ["ChangeIn", "ChangeLookup", "ChangesEndpoint"]

ENDPOINT = "changes"
MAX_PER_REQUEST = 1000
MAX_KEY = 200
SOURCE = "api"


class ChangeLookup(Protocol):
    """What the endpoint asks the change log (handed over by wiring) to recognise a retry."""

    def get(self, ids: Sequence[str]) -> dict[str, Change]: ...

    def find_same(self, change: Change, since: float) -> Change | None: ...


class PurgeIn(StrictModel):
    """A cache purge posted as a change (docs/edge.md): its ``what`` is written as ``cache purge <scope> <pattern>``."""

    pattern: str = Field(min_length=1, max_length=480, pattern=r"^\S+$", description="Path pattern purged.")
    scope: Literal["prefix", "exact", "glob"] = Field("prefix", description="How the pattern matches paths.")


class ChangeIn(StrictModel):
    """The body of ``POST /v1/changes`` (one object, or a list of them)."""

    what: str = Field(min_length=1, max_length=500, description="What changed (e.g. 'feature PR#221').")
    who: str = Field("", max_length=200, description="Who made the change.")
    at: float | None = Field(None, description="Unix seconds; default: when received.")
    model: str | None = Field(None, max_length=200, description="Model concerned; none: every model.")
    version: str | None = Field(
        None, max_length=100, description="Model version concerned: a string, or an integer as events accept."
    )
    link: str | None = Field(None, max_length=2000, description="A link, e.g. the pull request.")
    id: str | None = Field(
        None,
        max_length=200,
        description="Idempotency key; default: the Idempotency-Key header, else derived from the fields.",
    )

    purge: PurgeIn | None = Field(None, description="A cache purge; `what` is then written from it.")

    @model_validator(mode="before")
    @classmethod
    def _purge_what(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(p := data.get("purge"), dict) and isinstance(p.get("pattern"), str):
            what = purge_what(p["pattern"], str(p.get("scope", "prefix")))
            if data.get("what") not in (None, what):
                raise ValueError(f"what: leave it out with purge (it is written as {what!r})")
            data = {**data, "what": what}
        return data

    @field_validator("version", mode="before")
    @classmethod
    def _integer_version(cls, v: object) -> object:
        # POST /v1/events takes `"version": 2` as "2"; a change of the same version must be postable alike.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("at")
    @classmethod
    def _at_in_range(cls, v: float | None) -> float | None:
        if v is not None and (why := check_unix_seconds(v)) is not None:
            raise ValueError(why)
        return v


class ChangesEndpoint(Passive):
    name = "changes_http"
    role = Role.SOURCE

    def __init__(
        self,
        cfg: ChangesConfig,
        *,
        lookup: ChangeLookup,
        bus: Bus,
        guard: RequestGuard,
        registry: CollectorRegistry,
        clock: Clock,
    ) -> None:
        """``lookup`` finds changes already recorded (retries); new ones are published on ``bus``."""
        self.lookup = lookup
        self.bus = bus
        self.guard = guard
        self.clock = clock
        self.window_secs = cfg.idempotency_window_secs
        self.max_future_secs = cfg.max_future_secs
        self._duplicates = Counter(
            "sidecar_changes_duplicates",
            "Changes posted again (a retry) and answered with the first one's id, not stored again.",
            registry=registry,
        )

    def _parse(self, body: bytes) -> tuple[list[ChangeIn], bool]:
        guard = self.guard
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise guard.refuse(ENDPOINT, "bad_json", 400, f"body is not JSON: {exc}") from None
        is_list = isinstance(data, list)
        items = data if is_list else [data]
        if len(items) > MAX_PER_REQUEST:
            raise guard.refuse(ENDPOINT, "too_many", 413, f"at most {MAX_PER_REQUEST} changes per request")
        parsed: list[ChangeIn] = []
        for i, item in enumerate(items):
            try:
                parsed.append(ChangeIn.model_validate(item))
            except ValidationError as exc:
                e = exc.errors()[0]
                where = ".".join(str(p) for p in e["loc"])
                prefix = f"[{i}]." if is_list else ""
                raise guard.refuse(ENDPOINT, "invalid", 400, f"{prefix}{where}: {e['msg']}") from None
        return parsed, is_list

    def _key(self, request: Request) -> str | None:
        raw = request.headers.get("idempotency-key")
        if raw is None:
            return None
        key = raw.strip().strip('"')  # a structured-field string may come quoted
        if not 0 < len(key) <= MAX_KEY or not all(" " <= ch <= "~" for ch in key):
            raise self.guard.refuse(
                ENDPOINT, "invalid", 400, f"Idempotency-Key: must be 1 to {MAX_KEY} printable ASCII characters"
            )
        return key

    def _resolve(
        self, parsed: list[ChangeIn], is_list: bool, key: str | None, now: float
    ) -> tuple[list[str], list[Change]]:
        """Each item's id, and the changes not recorded yet; raises 400 for a time too far ahead (it would head
        every "newest first" list for good) and 422 for a key reused for another change."""
        for i, c in enumerate(parsed):
            if c.at is not None and c.at > now + self.max_future_secs:
                raise self.guard.refuse(
                    ENDPOINT,
                    "future",
                    400,
                    f"{f'[{i}].' if is_list else ''}at: {c.at - now:.0f} s in the future (at most "
                    f"{self.max_future_secs:g} s ahead of this sidecar's clock; Unix seconds, not milliseconds?)",
                )
        keyed: list[tuple[str, str, Change]] = []  # (where the key came from, key, the change as posted)
        for i, c in enumerate(parsed):
            ch = Change(
                what=c.what,
                who=c.who,
                at=c.at if c.at is not None else now,
                model=c.model,
                version=c.version,
                link=c.link,
                source=SOURCE,
            )
            prefix = f"[{i}]." if is_list else ""
            if c.id:
                keyed.append((f"{prefix}id", c.id, _with(ch, c.id)))
            elif key is not None:
                k = f"{key}#{i}" if is_list else key
                keyed.append(("Idempotency-Key", k, _with(ch, k)))
            elif c.at is not None:
                keyed.append(("", derived_id(ch), _with(ch, derived_id(ch))))
            else:
                keyed.append(("", "", ch))  # no key and no `at`: matched by content within the window
        known = self.lookup.get([k for _, k, _ in keyed if k])
        ids: list[str] = []
        new: dict[str, Change] = {}
        for (where, k, ch), c in zip(keyed, parsed, strict=True):
            if not k:
                first = self.lookup.find_same(ch, now - self.window_secs)
                if first is not None:
                    known[first.id] = first
                k = first.id if first is not None else derived_id(ch)
                ch = _with(ch, k)
            prior = known.get(k) or new.get(k)
            if prior is None:
                new[k] = ch
            elif not _same(prior, ch, c.at is not None):
                raise self.guard.refuse(
                    ENDPOINT,
                    "idempotency_conflict",
                    422,
                    f"{where or 'id'}: {k!r} was already used for a different change",
                )
            ids.append(k)
        return ids, list(new.values())

    async def handle(self, request: Request) -> JSONResponse:
        guard = self.guard
        guard.authorize(request, "push", ENDPOINT)
        media_type(request, JSON, guard, ENDPOINT)
        async with guard.admit(ENDPOINT):
            parsed, is_list = self._parse(await guard.read_body(request, ENDPOINT))
            key = self._key(request)
            now = self.clock.now()
            try:
                ids, new = self._resolve(parsed, is_list, key, now)
            except sqlite3.Error as exc:
                # The change log could not be read to tell a retry from a new change: nothing is stored.
                raise guard.refuse(
                    ENDPOINT,
                    "store",
                    503,
                    f"the store cannot be read ({exc}); nothing was stored; retry",
                    {"Retry-After": "5"},
                ) from None
            batch = Batch(kind="changes", source=SOURCE, items=tuple(new), received_at=now)
            failed = self.bus.publish(batch) if new else []
            if (failure := guard.push_failures.check("/v1/changes", failed)) is not None:
                # The change log stores nothing of a batch it fails on (one transaction), and a retry never
                # duplicates what others did store (changes are matched by id): 500 naming it, counted.
                return failure.response()
            if len(ids) > len(new):
                self._duplicates.inc(len(ids) - len(new))
        return JSONResponse(status_code=201 if new else 200, content={"ids": ids})

    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.post("/v1/changes", status_code=201, tags=["changes"])
        async def post_changes(request: Request) -> JSONResponse:
            return await self.handle(request)

        return router


def _with(c: Change, cid: str) -> Change:
    return Change(
        what=c.what, who=c.who, at=c.at, model=c.model, version=c.version, link=c.link, source=c.source, id=cid
    )


def _same(prior: Change, posted: Change, at_given: bool) -> bool:
    """Whether ``posted`` is a retry of ``prior`` (its time only counts when the client gave one)."""
    fields = ("what", "who", "model", "version", "link")
    return all(getattr(prior, f) == getattr(posted, f) for f in fields) and (not at_given or prior.at == posted.at)
