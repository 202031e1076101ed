"""The httpx bridge: lets the Anthropic SDK (on httpx2) send through an httpx.AsyncClient.

The SDK only accepts httpx2 clients; callers (and tests, ASGI apps) often hold an httpx one.
Internal to the Anthropic adapter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import httpx2

__all__ = ["as_httpx2", "base_url_of"]


def _translated(err: httpx.HTTPError, request: httpx2.Request) -> httpx2.HTTPError:
    # httpx2 is a fork of httpx with the same exception names, so the SDK's handling
    # (timeouts vs connection errors) sees what it would see on its own transport.
    cls = getattr(httpx2, type(err).__name__, httpx2.TransportError)
    if not (isinstance(cls, type) and issubclass(cls, httpx2.RequestError)):
        cls = httpx2.TransportError
    return cls(str(err), request=request)


_BODY_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class _BridgedStream(httpx2.AsyncByteStream):
    def __init__(self, response: httpx.Response, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as err:
            raise _translated(err, self._request) from err

    async def aclose(self) -> None:
        await self._response.aclose()


class _HttpxBridge(httpx2.AsyncBaseTransport):
    """Sends the SDK's httpx2 requests through an httpx.AsyncClient (e.g. an ASGI app)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        outbound = self._client.build_request(
            request.method,
            str(request.url),
            headers=request.headers.multi_items(),
            content=await request.aread(),
        )
        # The SDK's timeout (600 s by default) rides on the request; without it the httpx
        # client's own default (5 s) would cut long generations.
        if "timeout" in request.extensions:
            outbound.extensions["timeout"] = request.extensions["timeout"]
        try:
            response = await self._client.send(outbound, stream=True)
        except httpx.HTTPError as err:
            raise _translated(err, request) from err
        # The body is passed on decoded (an httpx response may already be read, e.g. from a
        # MockTransport), so the headers describing its encoding and length are dropped.
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in _BODY_ENCODING_HEADERS
        ]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=_BridgedStream(response, request),
            request=request,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def as_httpx2(
    http_client: httpx2.AsyncClient | httpx.AsyncClient | None,
) -> httpx2.AsyncClient | None:
    # The SDK (2.x) only accepts httpx2 clients; an httpx client is bridged, not rejected.
    if isinstance(http_client, httpx.AsyncClient):
        return httpx2.AsyncClient(transport=_HttpxBridge(http_client))
    return http_client


def base_url_of(http_client: httpx2.AsyncClient | httpx.AsyncClient | None) -> str | None:
    # The SDK ignores the http client's base_url, so a client aimed at a host is honoured here.
    if http_client is None or not str(http_client.base_url):
        return None
    return str(http_client.base_url)
