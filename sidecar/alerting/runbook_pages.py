"""Serves the runbooks (``docs/runbooks``, shipped in the package as ``sidecar/alerting/runbooks``) as pages at
``/runbooks/<name>.md``, so the runbook link of every alert works with no internet when no ``runbook_url`` is
configured. Only names of existing ``.md`` files in that one folder are served: nothing else is reachable.

Each page is the runbook's Markdown rendered by markdown-it-py with raw HTML off (a runbook's ``<tag>`` is shown as
text, never run) inside the pages' layout, under a table of the settings the running config gives the alert
(``runbook_params``). Links are made to work on the sidecar: ``Other.md`` to that runbook's page, a dashboard
section of docs/dashboards.md to the Grafana dashboard when ``dashboard_url`` is set, other docs (not served here)
to plain text naming the file, absolute paths (``/drift``) and ``http(s)`` links left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup
from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel

from sidecar.alerting.runbook_params import ParamTable, param_tables
from sidecar.component import Passive, Role

__all__ = ["DASHBOARDS", "RUNBOOKS_DIR", "Runbook", "RunbookPages", "resolve_link"]

RUNBOOKS_DIR = Path(__file__).resolve().parent / "runbooks"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}\.md$")
# docs/dashboards.md's sections -> the uid of the Grafana dashboard each describes (dashboards/*.py).
DASHBOARDS = {
    "serving-overview": "triton-sidecar-serving",
    "gpu": "triton-sidecar-gpu",
    "drift": "triton-sidecar-drift",
    "business-metrics": "triton-sidecar-business",
    "sidecar-health": "triton-sidecar-health",
}

Render = Callable[..., str]


def resolve_link(href: str, runbooks: frozenset[str], dashboard_base: str | None) -> str | None:
    """Where a runbook's link goes on the sidecar; None when it has no target here (then it is shown as text)."""
    if href.startswith(("http://", "https://", "mailto:", "#", "/")):
        return href
    path, _, anchor = href.partition("#")
    if path in runbooks:
        return f"/runbooks/{href}"
    if path == "../dashboards.md" and dashboard_base and anchor in DASHBOARDS:
        return f"{dashboard_base.rstrip('/')}/d/{DASHBOARDS[anchor]}"
    return None


def _docs_name(href: str) -> str:
    """``../verdicts.md#cold-start-watch`` -> ``docs/verdicts.md#cold-start-watch`` (where the reader finds it)."""
    return "docs/" + href.removeprefix("../") if href.startswith("../") else href


@dataclass(frozen=True)
class Runbook:
    title: str
    body: Markup  # HTML from markdown-it with raw HTML off: safe to put in the page as it is
    links: tuple[str, ...]  # every href the page's body carries (for the tests and the curious)


class RunbookPages(Passive):
    name = "runbooks"
    role = Role.PAGE

    def __init__(
        self,
        config: BaseModel,
        *,
        registry: CollectorRegistry,
        render: Render,
        folder: Path = RUNBOOKS_DIR,
    ) -> None:
        """``config``: the whole sidecar config (the parameter tables read it); ``render``: the pages' template
        renderer (``sidecar.pages.render.render``), handed in so this layer does not import the pages."""
        self.config = config
        self.render = render
        self.folder = folder
        self.dashboard_base: str | None = getattr(config, "dashboard_url", None)
        # Read once: the set is fixed for a release, and a request never touches a path it names itself.
        self.pages = {p.name: p for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}
        self._cache: dict[str, Runbook] = {}  # at most one entry per file in the folder
        self._md = MarkdownIt("commonmark", {"html": False}).enable("table")
        self._refused = Counter(
            "sidecar_runbook_requests_refused",
            "Runbook requests answered 404, by reason (unknown: no runbook of that name).",
            ["reason"],
            registry=registry,
        )
        self._refused.labels("unknown")

    def runbook(self, name: str) -> Runbook:
        """The page of runbook ``name`` (one of ``self.pages``), rendered once: files and config are fixed."""
        cached = self._cache.get(name)
        if cached is None:
            cached = self._cache[name] = self._build(name)
        return cached

    def _build(self, name: str) -> Runbook:
        text = self.pages[name].read_text(encoding="utf-8")
        tokens = self._md.parse(text)
        title = name.removesuffix(".md")
        if len(tokens) >= 3 and tokens[0].type == "heading_open" and tokens[0].tag == "h1":
            title = tokens[1].content
            tokens = tokens[3:]  # the title goes in the page's own heading
        links: list[str] = []
        names = frozenset(self.pages)
        for tok in tokens:
            if tok.type == "inline" and tok.children:
                tok.children = self._relink(tok.children, names, links)
        body = self._md.renderer.render(tokens, self._md.options, {})
        return Runbook(title, Markup(body), tuple(links))  # markdown-it escaped any HTML in it (html off)

    def _relink(self, children: list[Token], names: frozenset[str], links: list[str]) -> list[Token]:
        out: list[Token] = []
        dropped: str | None = None
        for tok in children:
            if tok.type == "link_open":
                href = str(tok.attrGet("href") or "")
                target = resolve_link(href, names, self.dashboard_base)
                if target is None:
                    dropped = href
                    continue
                tok.attrSet("href", target)
                links.append(target)
            elif tok.type == "link_close" and dropped is not None:
                note = Token("text", "", 0)
                note.content = f" ({_docs_name(dropped)})"
                out.append(note)
                dropped = None
                continue
            out.append(tok)
        return out

    def tables(self, name: str) -> list[ParamTable]:
        return param_tables(self.config, name)

    def routes(self) -> APIRouter:
        router = APIRouter()

        @router.get("/runbooks/", response_class=HTMLResponse)
        async def runbook_index() -> HTMLResponse:
            entries = [(n, self.runbook(n).title, bool(self.tables(n))) for n in self.pages]
            return HTMLResponse(self.render("runbook_index.html", entries=entries))

        @router.get("/runbooks/{name:path}", response_class=HTMLResponse)
        async def runbook(name: str) -> HTMLResponse:
            if not (_NAME.match(name) and name in self.pages):
                self._refused.labels("unknown").inc()
                raise HTTPException(404, f"no runbook {name}; the index is at /runbooks/")
            rb = self.runbook(name)
            return HTMLResponse(self.render("runbook.html", name=name, runbook=rb, tables=self.tables(name)))

        return router
