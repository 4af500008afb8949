"""Observability and drift-monitoring sidecar for NVIDIA Triton Inference Server."""

__version__ = "0.1.0"
__all__ = ["__version__"]
