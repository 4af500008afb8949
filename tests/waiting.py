"""The one way tests wait for a real process (Triton, Prometheus, Alertmanager, a server thread): poll a condition
until a deadline. Nothing here is timing: a condition that holds at once returns at once, and the deadline only
bounds how long a broken process can stall the suite. Code under test never sleeps in tests; it gets a FakeClock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    cond: Callable[[], T], timeout_s: float, *, interval_s: float = 0.05, ignore: tuple[type[BaseException], ...] = ()
) -> T | None:
    """Return the first truthy value of ``cond()`` within ``timeout_s``, else None (the caller asserts).

    ``ignore`` lists exceptions that mean "not yet" (e.g. a connection refused while a server starts).
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        try:
            got = cond()
            if got:
                return got
        except ignore:
            pass
        if time.monotonic() >= deadline:
            return None
        pause.wait(interval_s)
