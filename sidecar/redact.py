"""Keep credentials out of everything a person or a scraper can read.

A URL may carry ``user:password@`` (Alertmanager, Triton, forwarding endpoints); a header map may carry
``Authorization``. Both are printed in logs, ``/readyz``, ``sidecar validate --print`` and metric labels, so
every such place goes through these two functions rather than printing the raw value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "SECRET_HEADERS", "SECRET_QUERY_KEYS", "mask_headers", "mask_text", "mask_url"]

MASK = "***"
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"})
# Query parameters some backends take credentials in (Elasticsearch cloud ids, signed URLs).
SECRET_QUERY_KEYS = frozenset(
    {"password", "passwd", "token", "access_token", "api_key", "apikey", "key", "secret", "signature", "sig"}
)


def mask_url(url: str) -> str:
    """``url`` with any password (and user) and credential-like query values replaced by ``***``.

    A value that does not parse as a URL is returned with everything after a ``@`` before the host masked,
    so a malformed URL still never prints a password.
    """
    try:
        parts: SplitResult = urlsplit(url)
        _ = parts.port  # raises on a malformed port, which would otherwise slip through unmasked
    except ValueError:
        _head, sep, tail = url.rpartition("@")
        return f"{MASK}@{tail}" if sep else url
    netloc = parts.netloc
    if "@" in netloc:
        creds, _, host = netloc.rpartition("@")
        user = creds.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in creds else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_QUERY_KEYS for k, _ in pairs):
            query = urlencode([(k, MASK if k.lower() in SECRET_QUERY_KEYS else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` with credential-bearing values replaced by ``***``."""
    return {k: (MASK if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


# A URL inside free text (a log line, a readiness message, an exception's str).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def mask_text(text: str) -> str:
    """``text`` with every URL in it masked as ``mask_url`` does."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: mask_url(m.group(0)), text)
