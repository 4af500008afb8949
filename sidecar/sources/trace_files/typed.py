"""A typed decode of a run of Triton trace records: one ``msgspec`` call into slotted structs, no dicts.

Triton's records are few shapes (``{"id", "timestamps": [{"name", "ns"}]}``, the model record, a TENSORS
row), so a run of complete records (the scan's fast path) is decoded straight into ``Rec`` structs. The structs
are untracked by the garbage collector (``gc=False``: they hold no containers that could form a cycle, only
strings, ints and lists of such structs), and the fold (``requests.Assembler.add``) reads their attributes
instead of looking up dict keys.

The types accept exactly the records the ordinary path (``orjson`` dicts folded by ``Assembler.add``) would
take without a refusal, and take them to the same values: ids and times within ``0..MAX_NS``, timestamp names
of at most ``MAX_STAMP_NAME`` characters, model versions within 64 bits (beyond that orjson reads a float),
no floats for ints, no ``null`` where the ordinary path would refuse or read it differently (``model_name``
present but ``null`` reads as ``""`` there, and here too). Anything else (a record the ordinary path would
refuse or count, a value of another type, a non-object array element, malformed JSON) fails the whole decode,
and the caller reads the run the ordinary way: nothing is refused, counted or worded differently here.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

__all__ = ["MAX_NS", "MAX_STAMP_NAME", "UNSET", "One", "Rec", "RecMany", "Stamp", "Tensor", "decode_run"]

MAX_NS = (1 << 63) - 1  # Triton's steady_clock ns is an int64
MAX_STAMP_NAME = 64  # characters of a timestamp name

_NS = Annotated[int, Meta(ge=0, le=MAX_NS)]
# orjson reads an int literal beyond 64 bits as a float (whose str differs); msgspec bounds fit an int64.
_VERSION_INT = Annotated[int, Meta(ge=-(1 << 63), le=MAX_NS)]


class Stamp(msgspec.Struct, gc=False):
    name: Annotated[str, Meta(max_length=MAX_STAMP_NAME)]
    ns: _NS


class Tensor(msgspec.Struct, gc=False):
    name: str
    data: str | None = None  # the ordinary path keeps ``tensor.get("data")``
    shape: str | None = ""  # and ``tensor.get("shape", "")``


class One(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A ``timestamps`` array of exactly one timestamp (Triton 2.51 writes one a record): no list object, so
    nothing the garbage collector tracks (a run of 14,500 requests decoded ~217,000 lists, and four collections
    scanned them). ``forbid_unknown_fields``: an array of more is refused, not cut short."""

    ts: Stamp


class _Fields(msgspec.Struct, gc=False):
    """A trace record's fields but its timestamps; those the fold ignores (``activity``, a tensor's ``dtype``)
    are skipped."""

    id: _NS
    model_name: str | UnsetType | None = UNSET  # present or not matters: a model record
    model_version: _VERSION_INT | str | None = None
    request_id: str | None = None
    parent_id: _NS | None = None  # the ordinary path ignores an out-of-range one: not taken here (falls back)
    tensor: Tensor | None = None


class Rec(_Fields, gc=False):
    """A record with one timestamp at most (every record of Triton 2.51's files)."""

    timestamps: One | None = None


class RecMany(_Fields, gc=False):
    """A record with a list of timestamps (any number; older Tritons wrote a trace's times in one record)."""

    timestamps: list[Stamp] | None = None


_ONE = msgspec.json.Decoder(list[Rec])
_MANY = msgspec.json.Decoder(list[RecMany])


def decode_run(body: bytes | memoryview) -> list[Rec] | list[RecMany] | None:
    """The records of ``body``, a run of complete JSON values separated by commas (without the array's
    brackets), as ``Rec`` when each has one timestamp at most, else as ``RecMany``; None when any of them is
    not a record of the types above (the caller reads them the ordinary way)."""
    doc = b"".join((b"[", body, b"]"))
    try:
        return _ONE.decode(doc)
    except msgspec.ValidationError:
        pass  # most likely a record of several timestamps (an older Triton's): it stops at the first
    except msgspec.DecodeError:
        return None
    try:
        return _MANY.decode(doc)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
