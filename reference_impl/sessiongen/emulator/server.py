"""Run the emulator under uvicorn: in the foreground (`serve`) or on a background thread."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn

from .app import create_app
from .state import EmulatorState

STARTUP_TIMEOUT = 10.0


def _config(state: EmulatorState | None, host: str, port: int, log_level: str) -> uvicorn.Config:
    # h11, no websockets, no lifespan: fewest moving parts and no optional imports.
    return uvicorn.Config(
        create_app(state),
        host=host,
        port=port,
        log_level=log_level,
        http="h11",
        ws="none",
        lifespan="off",
        access_log=False,
    )


def serve(host: str = "127.0.0.1", port: int = 8765, state: EmulatorState | None = None) -> None:
    """Serve the emulator until interrupted (what `sessiongen emulator` calls).

    Raises `ValueError` for a port outside 1..65535 and `OSError` when `host:port` cannot
    be bound (address in use, unknown host), before serving; uvicorn itself would log the
    failure and exit the process instead.
    """
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be from 1 to 65535, got {port}")
    # Bind and release every address uvicorn's asyncio server will bind, with the same
    # options (SO_REUSEADDR, v6-only), so the probe refuses exactly what uvicorn would.
    # A port taken in the instant between probe and serve still ends in uvicorn's exit.
    for family, kind, proto, _, address in socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)
    uvicorn.Server(_config(state, host, port, "info")).run()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class BackgroundServer:
    """The emulator on a real loopback socket, served from a daemon thread.

    Use as a context manager; `url` is the base URL for `anthropic.Anthropic(base_url=...)`
    and `state` the shared `EmulatorState`.
    """

    def __init__(
        self,
        state: EmulatorState | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        log_level: str = "warning",
    ) -> None:
        self.state = state if state is not None else EmulatorState()
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._server = uvicorn.Server(_config(self.state, host, self.port, log_level))
        self._thread = threading.Thread(target=self._server.run, name="emulator", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the emulator did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=STARTUP_TIMEOUT)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
