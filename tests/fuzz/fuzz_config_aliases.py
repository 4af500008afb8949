"""atheris target: YAML anchors and aliases (bombs, self-references, merges) in a config file are refused only
with ConfigError, within a time and memory bound: never a crash, a RecursionError or unbounded growth."""

import contextlib
import sys
import time
import tracemalloc

import atheris

with atheris.instrument_imports(include=["sidecar"]):
    from sidecar.config import load_config_text
    from sidecar.errors import ConfigError

# What one input may cost: a bomb must be refused before it expands (the unbounded loader took 662 MB).
MAX_PEAK_BYTES = 64 * 1024 * 1024
MAX_SECS = 5.0


def _document(data: bytes) -> str:
    """Anchored lists and mappings whose items alias earlier (or their own, or later) anchors, with merges,
    so most inputs reach the alias checks rather than a YAML syntax error."""
    fdp = atheris.FuzzedDataProvider(data)
    lines = []
    for i in range(fdp.ConsumeIntInRange(1, 14)):
        items = []
        for n in range(fdp.ConsumeIntInRange(0, 40)):
            pick = fdp.ConsumeIntInRange(0, 5)
            if pick <= 2:
                items.append(f"*a{fdp.ConsumeIntInRange(0, i + 1)}")
            elif pick == 3:
                items.append(repr(fdp.ConsumeUnicodeNoSurrogates(8)).replace("'", '"'))
            elif pick == 4:
                items.append(f"{{k{n}: *a{fdp.ConsumeIntInRange(0, i)}}}")
            else:
                items.append(str(fdp.ConsumeInt(4)))
        if fdp.ConsumeBool():
            body = "[" + ", ".join(items) + "]"
        else:
            body = "{" + ", ".join(f"k{n}: {v}" for n, v in enumerate(items)) + "}"
            if i and fdp.ConsumeBool():
                body = body[:-1] + (", " if items else "") + f"<<: *a{fdp.ConsumeIntInRange(0, i)}}}"
        lines.append(f"a{i}: &a{i} {body}")
    return "\n".join(lines) + "\n" + fdp.ConsumeUnicodeNoSurrogates(40)


def TestOneInput(data: bytes) -> None:
    text = _document(data)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with contextlib.suppress(ConfigError):
            load_config_text(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took = time.perf_counter() - t0
    if peak > MAX_PEAK_BYTES or took > MAX_SECS:
        raise AssertionError(f"{peak} bytes, {took:.1f} s for {text[:300]!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
