"""atheris target: POST /v1/changes's body parsing and idempotency resolution refuse bad input only with a
4xx, store nothing of a refused body, and store only renderable times."""

import json
import sys
from pathlib import Path

import atheris

# Fuzz the checkout this file is in, not whichever copy of the package is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# Only the code under test is instrumented: instrumenting FastAPI, pydantic and httpx too cost about 20 s of CPU
# at start-up for no coverage that matters here.
import httpx
from fastapi import HTTPException
from prometheus_client import CollectorRegistry

with atheris.instrument_imports(include=["sidecar.sources.changes_http", "sidecar.state.changes", "sidecar.timerange"]):
    from sidecar.clock import FakeClock
    from sidecar.component import Bus, Context
    from sidecar.config import parse_config
    from sidecar.httpguard import RequestGuard
    from sidecar.model import Batch
    from sidecar.sources.changes_http import ChangesEndpoint
    from sidecar.state.changes import ChangeLog
    from sidecar.state.changes_config import ChangesConfig
    from sidecar.store import Store
    from sidecar.timerange import renderable

NOW = 1_700_000_000.0
REG = CollectorRegistry()
CTX = Context(
    config=parse_config({}),
    registry=REG,
    clock=FakeClock(NOW),
    http=httpx.AsyncClient(),
    store=Store(":memory:"),
    bus=Bus(REG),
    guard=RequestGuard(REG, max_body_bytes=1 << 20),
)
LOG = ChangeLog(ChangesConfig(max_changes=200), registry=REG, clock=CTX.clock, store=CTX.store)
CTX.bus.subscribe("changes", LOG.name, LOG.on_changes)
ENDPOINT = ChangesEndpoint(ChangesConfig(), lookup=LOG, bus=CTX.bus, guard=CTX.guard, registry=REG, clock=CTX.clock)


def _count() -> int:
    return int(CTX.store.query("SELECT COUNT(*) FROM alerting_changes")[0][0])


FIELDS = ("what", "who", "at", "model", "version", "link", "id", "colour")


def _structured(data: bytes) -> bytes:
    """A change-shaped body built from the bytes, so the fuzzer gets past the JSON decoder to every field's
    check and to the idempotency rules (repeated texts and ids are likely: few distinct values)."""
    fdp = atheris.FuzzedDataProvider(data)
    items = []
    for _ in range(fdp.ConsumeIntInRange(1, 5)):
        item: dict[str, object] = {}
        for _ in range(fdp.ConsumeIntInRange(0, 6)):
            kind = fdp.ConsumeIntInRange(0, 5)
            value: object = [
                None,
                fdp.ConsumeBool(),
                fdp.ConsumeInt(8),
                fdp.ConsumeFloat(),
                fdp.PickValueInList(["a", "b", "", "x" * 600]),
                NOW + fdp.ConsumeFloatInRange(-2e6, 2e6),
            ][kind]
            item[FIELDS[fdp.ConsumeIntInRange(0, len(FIELDS) - 1)]] = value
        items.append(item)
    return json.dumps(items if len(items) > 1 or fdp.ConsumeBool() else items[0]).encode()


def TestOneInput(data: bytes) -> None:
    before = _count()
    key = None
    if data[:1] == b"S":
        data = _structured(data[1:])
    if data[:1] == b"K":  # an Idempotency-Key: the bytes up to the first newline
        head, _, data = data[1:].partition(b"\n")
        key = head.decode("latin-1")
    try:
        parsed, is_list = ENDPOINT._parse(data)
        ids, new = ENDPOINT._resolve(parsed, is_list, key, CTX.clock.now())
    except HTTPException as exc:
        if not 400 <= exc.status_code < 500:
            raise
        if _count() != before:
            raise AssertionError("a refused body stored something") from None
        return
    if new and CTX.bus.publish(Batch(kind="changes", source="api", items=tuple(new))):
        raise AssertionError("the change log failed on a body the endpoint accepted")
    if len(ids) != len(parsed):
        raise AssertionError("an item got no id")
    for cid, at in CTX.store.query("SELECT id, at FROM alerting_changes"):
        if not renderable(at):
            raise AssertionError(f"stored an unrenderable time {at!r} ({cid})")


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
