"""atheris target: the Triton trace-file reader takes any bytes without raising, and reading them in two pieces
(cut where the input says) takes the same records as reading them whole, by either decoding path, and the
source's lean read (typed structs or one-timestamp tuples) folds to the same requests and refusals.

Odd first bytes feed the bytes as they are; even ones build Triton-shaped records from them (ids, timestamps
with any int, model records, tensors with any data and shape), so the fuzzer reaches the request, span and
tensor code and not only the JSON scanner.
"""

import json
import sys
from pathlib import Path

import atheris

# The checkout this target lives in, not whichever copy of the package the interpreter has installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["sidecar.sources.trace_files"]):
    from sidecar.sources.events.config import TensorMapping
    from sidecar.sources.trace_files.records import scan
    from sidecar.sources.trace_files.requests import Assembler
    from sidecar.sources.trace_files.spans import plausible, records_to_spans
    from sidecar.sources.trace_files.tensors import events_from_requests

MAPPING = {"ctr": TensorMapping(inputs={"x": ["a", "b", "c"]}, map_unlisted=True)}
OFFSET = 1_799_999_000_000_000_000  # a mapping from Triton's monotonic ns to Unix ns
STAMPS = [
    "HTTP_RECV_START",
    "HTTP_RECV_END",
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "REQUEST_END",
    "INFER_RESPONSE_COMPLETE",
    "HTTP_SEND_START",
    "HTTP_SEND_END",
    "GRPC_WAITREAD_START",
    "GRPC_SEND_END",
    "CUSTOM",
]


def _records(fdp: "atheris.FuzzedDataProvider") -> bytes:
    recs: list[object] = []
    for _ in range(fdp.ConsumeIntInRange(0, 12)):
        kind = fdp.ConsumeIntInRange(0, 3)
        rid: object = fdp.ConsumeIntInRange(0, 4) if fdp.ConsumeBool() else fdp.ConsumeInt(10)
        if kind == 0:
            recs.append(
                {
                    "id": rid,
                    "timestamps": [
                        {"name": fdp.PickValueInList(STAMPS), "ns": fdp.ConsumeInt(9)}
                        for _ in range(fdp.ConsumeIntInRange(0, 3))
                    ],
                }
            )
        elif kind == 1:
            rec = {
                "id": rid,
                "model_name": fdp.PickValueInList(["ctr", "x" * 70, ""]),
                "model_version": fdp.ConsumeIntInRange(0, 3),
                "request_id": fdp.ConsumeUnicodeNoSurrogates(8),
            }
            if fdp.ConsumeBool():
                rec["parent_id"] = fdp.ConsumeInt(9)
            recs.append(rec)
        elif kind == 2:
            data = ",".join(str(fdp.ConsumeRegularFloat()) for _ in range(fdp.ConsumeIntInRange(0, 9)))
            shape = ",".join(str(fdp.ConsumeInt(5)) for _ in range(fdp.ConsumeIntInRange(0, 3)))
            recs.append(
                {
                    "id": rid,
                    "activity": "TENSOR_QUEUE_INPUT",
                    "tensor": {"name": fdp.PickValueInList(["x", "score", "y"]), "data": data, "shape": shape},
                }
            )
        else:
            recs.append(fdp.ConsumeUnicodeNoSurrogates(12))
    return json.dumps(recs).encode()


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    if data[0] & 1:
        cut = data[0] * len(data) // 256
        body = data[1:]
    else:
        fdp = atheris.FuzzedDataProvider(data[1:])
        body = _records(fdp)
        cut = data[0] * len(body) // 256
    whole = scan(body)
    slow = scan(body, fast=False)  # the one-call orjson path and the record-by-record path agree
    assert (whole.records, whole.consumed, whole.closed, whole.held) == (
        slow.records,
        slow.consumed,
        slow.closed,
        slow.held,
    ), body
    lean = scan(body, lean=True)  # typed records (typed.py) or one-timestamp tuples where they fit
    assert (lean.consumed, lean.closed, lean.held, lean.damaged, lean.not_objects) == (
        whole.consumed,
        whole.closed,
        whole.held,
        whole.damaged,
        whole.not_objects,
    ), body
    a, b = Assembler(max_pending=16, max_string=64), Assembler(max_pending=16, max_string=64)
    ga: dict = {}
    gb: dict = {}
    a.add(whole.records, ga)
    b.add(lean.records, gb)
    assert (list(gb.items()), b.refused) == (list(ga.items()), a.refused), body
    first = scan(body[:cut])
    second = scan(body[first.consumed :], at_start=first.consumed == 0)
    if not whole.damaged and not first.damaged and not second.damaged:
        assert first.records + second.records == whole.records, (cut, body)
    asm = Assembler(max_pending=16, max_string=64)
    grouped: dict = {}
    asm.add(whole.records, grouped)
    ready, _ = asm.settle(grouped, quiet=True)
    ready += asm.drain_old()
    ok = [q for q in ready if plausible(q, OFFSET)]
    for span in records_to_spans(ok, OFFSET, "/trace.json"):
        assert 0 <= span.start_unix_nano <= span.end_unix_nano < 1 << 63
    skipped: dict[str, int] = {}
    for e in events_from_requests(ok, MAPPING, 0.0, 256, skipped):
        assert len(e.features) <= 256


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
