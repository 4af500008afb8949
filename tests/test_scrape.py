from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from sidecar.errors import ScrapeError
from sidecar.scrape import fetch_exposition


async def fetch(handler: Callable[[httpx.Request], httpx.Response], **kw: object) -> str:
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        return await fetch_exposition(http, "http://t/metrics", what="T", timeout_s=1, **kw)  # type: ignore[arg-type]


async def endless() -> AsyncIterator[bytes]:
    while True:
        yield b"a 1\n" * 1000


def boom(exc: type[httpx.HTTPError]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(r: httpx.Request) -> httpx.Response:
        raise exc("x", request=r)

    return handler


async def test_a_good_body_comes_back_as_text() -> None:
    assert await fetch(lambda r: httpx.Response(200, text="a 1\n")) == "a 1\n"


@pytest.mark.parametrize(
    "handler, kw, reason",
    [
        (lambda r: httpx.Response(503), {}, "http_status"),
        (lambda r: httpx.Response(200, text="<html>", headers={"content-type": "text/html"}), {}, "content_type"),
        (lambda r: httpx.Response(200, content=endless()), {"max_bytes": 10_000}, "too_large"),
        (boom(httpx.ReadTimeout), {}, "timeout"),
        (boom(httpx.ConnectError), {}, "connect"),
    ],
)
async def test_every_failure_has_a_bounded_reason(
    handler: Callable[[httpx.Request], httpx.Response], kw: dict[str, object], reason: str
) -> None:
    with pytest.raises(ScrapeError) as err:
        await fetch(handler, **kw)
    assert err.value.reason == reason


async def test_content_type_check_can_be_off() -> None:
    got = await fetch(
        lambda r: httpx.Response(200, text="a 1\n", headers={"content-type": "text/html"}), check_content_type=False
    )
    assert got == "a 1\n"
