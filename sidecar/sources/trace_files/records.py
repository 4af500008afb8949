"""Incremental reading of one Triton trace file: the complete records after a byte offset, and where to resume.

Triton writes a file as one JSON array, ``[{record},{record},...]``, appended to while it runs and closed with
``]``. orjson has no streaming mode, so records are decoded one at a time with the standard library's
``raw_decode`` (C-accelerated), which says where each one ends. A record cut short by the end of what has been
written so far is *held*: it is not consumed, so the next read starts at its first byte and parses it whole once
the rest arrives (never dropped, never parsed twice). Bytes that cannot be a record prefix (damage in the middle
of a file) are skipped up to the next record start and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from sidecar.sources.trace_files.typed import decode_run

__all__ = ["Scan", "next_record", "parse_records", "scan"]


def _int(s: str) -> int | float:
    """An int literal as orjson reads it (the fast path), so both paths agree: beyond 64 bits it is a float,
    and a literal too long for ``int()`` (Python's digit limit) is not an error either."""
    if len(s) <= 20:
        v = int(s)
        if -(1 << 63) <= v < 1 << 64:
            return v
    return float(s)


_DECODER = json.JSONDecoder(parse_int=_int)
_WS = " \t\r\n"
# Where a record can start again after damage: every record Triton writes begins with its trace id.
_RECORD_START = re.compile(r'\{\s*"id"\s*:')
# A decode failure this close to the end of what was read is taken for a record still being written.
_NEAR_END = 32


@dataclass
class Scan:
    records: list[Any] = field(default_factory=list)  # dicts; with ``lean``, also typed.Rec structs or tuples
    consumed: int = 0  # bytes of the input taken, up to the end of the last complete record or separator
    closed: bool = False  # the last thing consumed was the array's closing ``]``
    held: int = 0  # bytes after ``consumed`` that look like a record still being written
    damaged: int = 0  # stretches of bytes skipped because they could not be records
    not_objects: int = 0  # array elements that were not JSON objects (skipped)


def _incomplete(err: Exception, text: str, pos: int) -> bool:
    if isinstance(err, json.JSONDecodeError):
        return err.msg.startswith("Unterminated string") or err.pos >= len(text) - _NEAR_END
    return False  # an int too long to convert, nesting too deep: more bytes will not make it a record


# Triton's commonest record, as it writes it (compact, one timestamp): taken without building its dicts. JSON
# ints have no leading zeros; 18 digits stay below 2**63 (an id or a time past that is the assembler's to
# refuse: it goes the ordinary way). A ``{"`` cannot start inside a JSON string, so a match starts a value: a
# top-level record unless it sits inside another value, and then the text around it does not parse and the
# read goes the ordinary way.
_TS_RECORD = re.compile(
    rb'\{"id":(0|[1-9][0-9]{0,17}),"timestamps":\[\{"name":"([A-Za-z_]{1,64})","ns":(0|[1-9][0-9]{0,17})\}\]\}'
)
_SEPARATORS = frozenset((b"", b","))
_NAMES: dict[bytes, str] = {}  # bytes -> str of timestamp names (bounded: at most _MAX_NAMES)
_MAX_NAMES = 256


def _name(b: bytes) -> str:
    s = _NAMES.get(b)
    if s is None:
        s = b.decode("ascii")
        if len(_NAMES) < _MAX_NAMES:
            _NAMES[b] = s
    return s


def _gap(gap: bytes, out: list[Any]) -> int:
    """Append the objects of the values in ``gap``; returns how many values were not objects, -1 when it does
    not parse."""
    g = gap.strip(b" \t\r\n,")
    if not g:
        return 0
    try:
        doc = orjson.loads(b"[" + g + b"]")
    except orjson.JSONDecodeError:
        return -1
    objects = [v for v in doc if isinstance(v, dict)]
    out += objects
    return len(doc) - len(objects)


def _lean(body: bytes) -> tuple[list[Any], int] | None:
    """The records of a run of complete values (``body``, without the brackets), each one-timestamp record as
    a ``(trace id, name, ns)`` tuple (``Assembler.add`` takes both forms), and how many values were not
    objects; None when it does not parse."""
    parts = _TS_RECORD.split(body)  # [text before, id, name, ns, text between, id, name, ns, ..., text after]
    out: list[Any] = []
    append = out.append
    known = _NAMES.get
    others = 0
    for i in range(0, len(parts) - 1, 4):
        gap = parts[i]
        if gap not in _SEPARATORS:
            n = _gap(gap, out)
            if n < 0:
                return None
            others += n
        nb = parts[i + 2]
        append((int(parts[i + 1]), known(nb) or _name(nb), int(parts[i + 3])))
    n = _gap(parts[-1], out)
    return None if n < 0 else (out, others + n)


def _fast(buf: bytes, at_start: bool, lean: bool = False) -> Scan | None:
    """The common cases with one orjson call: a closed array, or whole records up to the last ``}``.

    ``[`` + a prefix ending at a ``}`` + ``]`` parses only if the prefix is a run of complete values (a prefix
    ending inside a string leaves it unterminated: JSON strings cannot hold a bare quote). Anything orjson
    refuses (NaN literals, ints beyond 64 bits, invalid UTF-8, damage) goes the slow way.
    """
    start = len(buf) - len(buf.lstrip(b" \t\r\n"))
    if at_start and buf[start : start + 1] == b"[":  # the array's opening bracket
        start += 1
    start = len(buf) - len(buf[start:].lstrip(b" \t\r\n,"))
    body = buf.rstrip(b" \t\r\n")
    closed = body.endswith(b"]") and len(body) > start
    end = len(body) - 1 if closed else buf.rfind(b"}") + 1
    if end <= start:
        return None
    out = Scan(consumed=len(buf) if closed else end, closed=closed)
    typed = decode_run(memoryview(buf)[start:end]) if lean else None  # one copy of the run, not two
    got = _lean(buf[start:end]) if lean and typed is None else None
    if typed is not None:
        out.records = typed
    elif got is not None:
        out.records, out.not_objects = got
    else:
        try:
            doc = orjson.loads(b"[" + buf[start:end] + b"]")
        except orjson.JSONDecodeError:
            return None
        for rec in doc:
            if isinstance(rec, dict):
                out.records.append(rec)
            else:
                out.not_objects += 1
    if not closed:
        rest = buf[end:]
        if rest.strip(b" \t\r\n,"):
            tail = scan(rest, at_start=False, fast=False)
            out.records += tail.records
            out.not_objects += tail.not_objects
            out.damaged += tail.damaged
            out.held, out.closed = tail.held, tail.closed
            out.consumed += tail.consumed
    return out


def scan(buf: bytes, at_start: bool = True, fast: bool = True, lean: bool = False) -> Scan:
    """The complete records in ``buf``, read from a record boundary of a trace file (``at_start``: from its
    first byte, where the array's ``[`` opens it; anywhere else a ``[`` begins a value). ``lean`` (the source's
    reads; ``Assembler.add`` takes every form): a run of complete records comes as ``typed.Rec`` structs when
    they all fit its types, else records of one timestamp may come as ``(trace id, name, ns)`` tuples."""
    if fast:
        got = _fast(buf, at_start, lean)
        if got is not None:
            return got
    # surrogateescape keeps every byte, even invalid UTF-8 or a character cut at the end of the read, so the
    # consumed prefix re-encodes to exactly the bytes it came from.
    text = buf.decode("utf-8", "surrogateescape")
    out = Scan()
    pos, n, consumed_chars = 0, len(text), 0
    opening = at_start  # a ``[`` before anything else opens the file's array; later ones are values
    while pos < n:
        c = text[pos]
        if c in _WS or c == "," or (c == "[" and opening):
            opening = opening and c in _WS
            pos += 1
            continue
        opening = False
        if c == "]":
            pos += 1
            out.closed = True
            consumed_chars = pos
            continue
        try:
            rec, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError) as err:
            if _incomplete(err, text, pos):
                out.held = len(text[pos:].encode("utf-8", "surrogateescape"))
                break
            nxt = _RECORD_START.search(text, pos + 1)
            out.damaged += 1
            if nxt is None:
                tail = text[pos:].rstrip(_WS)
                if tail.endswith("]"):  # damage at the very end of a closed file: nothing more will come
                    out.closed = True
                    consumed_chars = pos = n
                    continue
                out.held = len(text[pos:].encode("utf-8", "surrogateescape"))
                break
            pos = consumed_chars = nxt.start()
            out.closed = False
            continue
        if isinstance(rec, dict):
            out.records.append(rec)
        else:
            out.not_objects += 1
        pos = consumed_chars = end
        out.closed = False
    if out.closed and not text[consumed_chars:].strip(_WS):
        consumed_chars = n  # what follows the closing bracket (a newline) belongs to the closed array
    out.consumed = len(text[:consumed_chars].encode("utf-8", "surrogateescape"))
    return out


def parse_records(text: bytes) -> tuple[list[dict[str, Any]], bool]:
    """Records of a whole trace file and whether it was complete (a closed array with nothing damaged or held)."""
    s = scan(text)
    return s.records, s.closed and not s.held and not s.damaged and text.lstrip().startswith(b"[")


_RECORD_START_BYTES = re.compile(_RECORD_START.pattern.encode())


def next_record(path: str, start: int, size: int) -> int:
    """Offset of the next record start at or after ``start`` in the file at ``path`` (``size`` when there is
    none yet), read a MiB at a time; raises OSError when the file cannot be read."""
    chunk = 1 << 20
    with open(path, "rb") as f:
        pos = start
        while pos < size:
            f.seek(pos)
            m = _RECORD_START_BYTES.search(f.read(chunk + 16))
            if m is not None:
                return pos + m.start()
            pos += chunk
    return size
