"""The shape of a finding's words, shared by every kind's renderer (kept apart so the renderers never import
the package that dispatches to them)."""

from __future__ import annotations

__all__ = ["FindingText"]

# (summary, description) of one finding.
FindingText = tuple[str, str]
