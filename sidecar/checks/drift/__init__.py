"""The drift check, split into its parts (see ``check.py`` for how they compose)."""

from sidecar.checks.drift.check import DriftCheck
from sidecar.checks.drift.evaluator import FeatureResult

__all__ = ["DriftCheck", "FeatureResult"]
