"""atheris target: the Prometheus text exposition parser refuses bad input only with ParseError."""

import contextlib
import sys

import atheris

with atheris.instrument_imports(include=["sidecar.promtext", "sidecar.errors"]):
    from sidecar.errors import ParseError
    from sidecar.promtext import parse_exposition


def TestOneInput(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(ParseError):
        parse_exposition(text, {})


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
