"""The templates and the stylesheet ship in the wheel: every file under sidecar/pages/templates and
sidecar/pages/static is matched by pyproject's package-data for ``sidecar`` (a template missing from the
wheel would be a 500 on an installed sidecar only, never in a checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_template_and_static_file_is_package_data() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the package supports 3.10
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sidecar"]
    pkg = ROOT / "sidecar"
    shipped = {p for pattern in patterns for p in pkg.glob(pattern) if p.is_file()}
    files = {p for d in ("templates", "static") for p in (pkg / "pages" / d).rglob("*") if p.is_file()}
    assert files and files <= shipped, sorted(str(p.relative_to(pkg)) for p in files - shipped)
    assert {p.name for p in files} >= {"base.html", "trace.html", "status.html", "alerts.html", "pages.css"}
