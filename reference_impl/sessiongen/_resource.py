"""`AsyncResource`: what `async with` closes. The provider adapters and the async HTTP client
each hold a connection pool and release it in `aclose()`; leaving the block calls it."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncResource:
    """Subclasses implement `aclose`; `async with` returns the object and then closes it."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
