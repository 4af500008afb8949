"""The queues a ``Sender`` drains: the protocol, and the bounded in-memory FIFO most exporters use (the
Alertmanager's durable one is ``exporters.outbox``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["MemoryQueue", "SendQueue"]

T = TypeVar("T")


class SendQueue(Protocol[T]):
    durable: bool

    def __len__(self) -> int: ...

    def put(self, items: Sequence[Any]) -> int:
        """Queue items; returns how many were refused because the queue is full.

        What a queue takes may differ from what it hands out (the outbox takes notices, gives rows)."""
        ...

    def head(self, n: int) -> list[T]: ...

    def settle(self, batch: list[T], keep: list[T]) -> None:
        """Remove ``batch`` (the current head) from the queue, except ``keep``, which stays at the head."""
        ...

    def clear(self) -> int: ...


class MemoryQueue(Generic[T]):
    """A bounded in-memory FIFO; safe for producers on other threads (deque appends are atomic)."""

    durable = False

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._q: deque[T] = deque()

    def __len__(self) -> int:
        return len(self._q)

    def put(self, items: Sequence[T]) -> int:
        room = max(0, self.max_items - len(self._q))
        self._q.extend(items[:room])
        return max(0, len(items) - room)

    def head(self, n: int) -> list[T]:
        return [self._q[i] for i in range(min(n, len(self._q)))]

    def settle(self, batch: list[T], keep: list[T]) -> None:
        for _ in range(len(batch)):
            self._q.popleft()
        self._q.extendleft(reversed(keep))

    def clear(self) -> int:
        n = len(self._q)
        self._q.clear()
        return n
