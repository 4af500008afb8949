"""Serves the runbooks (``docs/runbooks``, shipped in the package as ``sidecar/alerting/runbooks``) at
``/runbooks/<name>.md``, so the runbook link of every alert works with no internet when no ``runbook_url`` is
configured. Only names of existing ``.md`` files in that one folder are served: nothing else is reachable."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import PlainTextResponse
from prometheus_client import CollectorRegistry, Counter

from sidecar.component import Passive

__all__ = ["RUNBOOKS_DIR", "RunbookPages"]

RUNBOOKS_DIR = Path(__file__).resolve().parent / "runbooks"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}\.md$")
_MARKDOWN = "text/markdown; charset=utf-8"


class RunbookPages(Passive):
    name = "runbooks"
    role = "page"

    def __init__(self, *, registry: CollectorRegistry, folder: Path = RUNBOOKS_DIR) -> None:
        self.folder = folder
        # Read once: the set is fixed for a release, and a request never touches a path it names itself.
        self.pages = {p.name: p for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}
        self._refused = Counter(
            "sidecar_runbook_requests_refused",
            "Runbook requests answered 404, by reason (unknown: no runbook of that name).",
            ["reason"],
            registry=registry,
        )
        self._refused.labels("unknown")

    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.get("/runbooks/", response_class=PlainTextResponse)
        async def runbook_index() -> PlainTextResponse:
            lines = ["# Runbooks", ""] + [f"- [{n.removesuffix('.md')}]({n})" for n in self.pages]
            return PlainTextResponse("\n".join(lines) + "\n", media_type=_MARKDOWN)

        @router.get("/runbooks/{name:path}", response_class=PlainTextResponse)
        async def runbook(name: str) -> PlainTextResponse:
            path = self.pages.get(name) if _NAME.match(name) else None
            if path is None:
                self._refused.labels("unknown").inc()
                raise HTTPException(404, f"no runbook {name}; the index is at /runbooks/")
            return PlainTextResponse(path.read_text(encoding="utf-8"), media_type=_MARKDOWN)

        return router
