"""atheris target: loading a config file refuses bad input only with ConfigError, never a crash."""

import contextlib
import sys

import atheris

with atheris.instrument_imports(include=["sidecar"]):
    from sidecar.config import load_config_text
    from sidecar.errors import ConfigError


def TestOneInput(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(ConfigError):
        load_config_text(text)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
