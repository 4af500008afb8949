"""HEAD answered wherever GET is: the same status and headers, no body (RFC 9110 section 9.3.2).

FastAPI routes declared with ``@app.get`` answer HEAD with 405; Starlette's plain routes and static files
already answer it. This middleware runs a HEAD request as a GET (so the response carries the GET's headers,
``content-length`` included) and drops the body on its way out. Plain ASGI, so other methods pass straight
through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadAsGet"]


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        finished = False

        async def send_head(message: Message) -> None:
            nonlocal finished
            if message["type"] != "http.response.body":
                await send(message)
            elif not finished:
                finished = not message.get("more_body", False)
                if finished:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})

        # A copy of the scope: the server's own record still says HEAD, so it never writes a body either.
        await self.app({**scope, "method": "GET"}, receive, send_head)
