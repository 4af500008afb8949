"""The one Jinja2 environment of the pages, the filters the templates share, and the static files."""

from __future__ import annotations

import datetime as dt
from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response
from jinja2 import Environment, PackageLoader, StrictUndefined

from sidecar import __version__
from sidecar.alerting.render.text import when
from sidecar.redact import mask_url

__all__ = ["STATIC_URL", "render", "static_routes"]

STATIC_URL = "/static/pages"
_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def ms(ns: int | float) -> str:
    v = ns / 1e6
    if v == 0:
        return "0 ms"
    return f"{v:.3f} ms" if v < 10 else f"{v:.1f} ms"


def when_ns(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def when_s(secs: float | None) -> str:
    """A moment on a page: the renderer's one formatter, so a page and an alert's text write it alike."""
    return when(secs)


def ago(secs: float | None) -> str:
    """A duration in words (``secs`` already elapsed), coarse on purpose: on-call reads it at a glance."""
    if secs is None:
        return ""
    s = max(0.0, secs)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.0f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


# autoescape=True for every template (not by file suffix): the SVG waterfall is HTML too, and a template
# added later must not silently come out unescaped.
_ENV = Environment(
    loader=PackageLoader("sidecar.pages", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(ms=ms, when_ns=when_ns, when_s=when_s, ago=ago, mask_url=mask_url)
_ENV.globals.update(static=STATIC_URL, sidecar_version=__version__)


def render(template: str, **context: object) -> str:
    return _ENV.get_template(template).render(**context)


def _static_files() -> dict[str, bytes]:
    root = resources.files("sidecar.pages") / "static"
    return {p.name: p.read_bytes() for p in root.iterdir() if p.name.endswith(tuple(_STATIC_TYPES))}


def static_routes() -> APIRouter:
    """The pages' CSS, read once from the package (a fixed set of names: no path from the URL reaches the
    file system)."""
    files = _static_files()
    r = APIRouter()

    @r.get(STATIC_URL + "/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        body = files.get(name)
        if body is None:
            raise HTTPException(404, f"no static file {name!r}")
        ctype = _STATIC_TYPES["." + name.rsplit(".", 1)[-1]]
        return Response(body, media_type=ctype, headers={"cache-control": "max-age=3600"})

    return r
