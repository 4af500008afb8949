"""Exceptions raised by the sidecar.

    SidecarError
    ├── ConfigError            a config file is invalid; carries the field path
    ├── StoreError             the embedded store cannot be opened or is held by another sidecar
    ├── InputError             (also a ValueError) a value given to the sidecar is refused; carries what
    │   ├── EventError         one field of one prediction event (``field``)
    │   ├── DataFileError      a reference or data file cannot be read (names the file and its role)
    │   ├── TemplateError      an annotation template uses what the sandbox does not allow
    │   └── ListParamError     a query parameter of a GET list API (``reason``)
    ├── SourceError            a source could not bring data in
    │   ├── ScrapeError        a scrape or poll failed (timeout, HTTP status, bad content type; ``reason``)
    │   ├── ParseError         a payload could not be decoded; carries the line or offset
    │   ├── ProbeFailure       a model probe got no usable answer (``reason``: timeout, unavailable, ...)
    │   ├── GpuLost            NVML says the GPU fell off the bus
    │   └── NvmlUninitialized  NVML is not (or no longer) initialised
    ├── ControlError           a call that changes the model server failed (trace settings; ``reason``)
    ├── ActionError            an action (reload, revert, fallback, webhook) did not happen; says why
    ├── CannotRun              a probe could not reach the model server at all, so nothing can be said
    └── ExportError            an exporter could not deliver
        ├── RetryableExportError   worth trying again (5xx, 429, connection error)
        │   └── DeliveryError      ... with a bounded ``reason`` label (connect, timeout, http_429, ...)
        └── PermanentExportError   never worth retrying (4xx other than 429)
            └── RefusedError       ... with a bounded ``reason`` label (http_4xx, ...)

Only ``sidecar.cli`` turns these into exit codes; everything after start-up counts and answers them.
``tests/test_errors.py`` holds every exception class of the sidecar to this tree.
"""

from __future__ import annotations

__all__ = [
    "ActionError",
    "CannotRun",
    "ConfigError",
    "ControlError",
    "DataFileError",
    "DeliveryError",
    "EventError",
    "ExportError",
    "GpuLost",
    "InputError",
    "ListParamError",
    "NvmlUninitialized",
    "ParseError",
    "PermanentExportError",
    "ProbeFailure",
    "RefusedError",
    "RetryableExportError",
    "ScrapeError",
    "SidecarError",
    "SourceError",
    "StoreError",
    "TemplateError",
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


class ProbeFailure(SourceError):
    """A probe that got no usable answer: ``reason`` timeout | unavailable | server_error | missing_output."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail[:300]


class ActionError(SidecarError):
    """An action that did not happen; the message says why (shown in the record, the alert and the audit)."""


class GpuLost(SourceError):
    """NVML says the GPU fell off the bus (or is otherwise gone)."""


class NvmlUninitialized(SourceError):
    """NVML is not initialised (or was shut down under the caller)."""


class InputError(SidecarError, ValueError):
    """A value given to the sidecar is refused (also a ``ValueError``, as Python's own checks raise)."""


class EventError(InputError):
    """One field of one prediction event is refused; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class DataFileError(InputError):
    """A data file that cannot be read; the message names the file and its role."""


class TemplateError(InputError):
    """A template uses something the sandbox does not allow."""


class ListParamError(InputError):
    """A refused query parameter; ``reason`` is a bounded label, the message names the parameter."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class ControlError(SidecarError):
    """A call that changes the model server's settings failed; ``reason`` is a bounded label value."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class CannotRun(SidecarError):
    """The model server could not be probed at all, so nothing can be said about it."""


class ExportError(SidecarError):
    """An exporter could not deliver."""


class RetryableExportError(ExportError):
    """Delivery may succeed later; ``retry_after_s`` is the server's throttle hint if it gave one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class PermanentExportError(ExportError):
    """Delivery will never succeed as sent (a 4xx other than 429)."""


class DeliveryError(RetryableExportError):
    """A retryable failure with a bounded ``reason`` label (connect, timeout, http_429, ...)."""

    def __init__(self, reason: str, message: str, retry_after_s: float | None = None) -> None:
        self.reason = reason
        super().__init__(message, retry_after_s)


class RefusedError(PermanentExportError):
    """The backend will never take the batch as sent; ``reason`` is a bounded label."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class StoreError(SidecarError):
    """The embedded store cannot be used: ``path`` is the file, ``message`` what to do about it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"store.path {path}: {message}")
