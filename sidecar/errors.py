"""Exceptions raised by the sidecar.

    SidecarError
    ├── ConfigError            a config file is invalid; carries the field path
    ├── StoreError             the embedded store cannot be opened or is held by another sidecar
    ├── SourceError            a source could not bring data in
    │   ├── ScrapeError        a scrape failed (timeout, HTTP status, bad content type)
    │   └── ParseError         a payload could not be decoded; carries the line or offset
    ├── RefusedError           input was refused by a bound (cardinality, body size, queue full)
    └── ExportError            an exporter could not deliver
        ├── RetryableExportError   worth trying again (5xx, 429, connection error)
        └── PermanentExportError   never worth retrying (4xx other than 429)

Only ``sidecar.cli`` turns these into exit codes; everything after start-up counts and answers them.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ExportError",
    "ParseError",
    "PermanentExportError",
    "RefusedError",
    "RetryableExportError",
    "ScrapeError",
    "SidecarError",
    "SourceError",
    "StoreError",
]


class SidecarError(Exception):
    """Base of every error the sidecar raises on purpose."""


class ConfigError(SidecarError):
    """A configuration problem; ``path`` is the dotted field path (``checks.ctr.window_secs``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class SourceError(SidecarError):
    """A source could not bring data in."""


class ScrapeError(SourceError):
    """A scrape failed; ``reason`` is a bounded label value (timeout, http_status, connect, content_type, parse)."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class ParseError(SourceError):
    """A payload could not be decoded; ``line`` is 1-based where known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class RefusedError(SidecarError):
    """Input refused by a bound; ``reason`` is a bounded label value."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class ExportError(SidecarError):
    """An exporter could not deliver."""


class RetryableExportError(ExportError):
    """Delivery may succeed later; ``retry_after_s`` is the server's throttle hint if it gave one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class PermanentExportError(ExportError):
    """Delivery will never succeed as sent (a 4xx other than 429)."""


class StoreError(SidecarError):
    """The embedded store cannot be used: ``path`` is the file, ``message`` what to do about it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"store.path {path}: {message}")
