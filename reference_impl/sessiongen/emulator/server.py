"""Run the emulator under uvicorn: in the foreground (`serve`) or on a background thread.

Both follow the session server's bind rule (`sessiongen._bind`): a non-loopback address
needs a token, and with one the admin API (`/_emulator/*`) wants `Authorization: Bearer
<token>`. Whoever reaches the admin API can read every logged request body, reset the
state and inject faults; the Messages API stays open to any SDK credentials, as before.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn

from .._bind import EMULATOR_TOKEN_ENV as TOKEN_ENV
from .._bind import check_bind, check_token, probe
from .app import create_app
from .state import EmulatorState

STARTUP_TIMEOUT = 10.0
EXPOSES = (
    "anyone who can reach it could read its request log and reset, script or fault it "
    "through /_emulator"
)


def check_emulator_bind(host: str, token: str | None) -> None:
    """The session server's bind check, worded for the emulator (`InsecureBind`)."""
    check_bind(host, token, token_env=TOKEN_ENV, exposes=EXPOSES)


def _config(
    state: EmulatorState | None, host: str, port: int, log_level: str, token: str | None
) -> uvicorn.Config:
    # h11, no websockets, no lifespan: fewest moving parts and no optional imports.
    return uvicorn.Config(
        create_app(state, token=token),
        host=host,
        port=port,
        log_level=log_level,
        http="h11",
        ws="none",
        lifespan="off",
        access_log=False,
    )


def serve(
    host: str = "127.0.0.1",
    port: int = 8765,
    state: EmulatorState | None = None,
    *,
    token: str | None = None,
) -> None:
    """Serve the emulator until interrupted (what `sessiongen emulator` calls).

    Before serving it raises `ValueError` for a port outside 1..65535, `OSError` when
    `host` does not resolve, `InsecureBind` (a ValueError) for a non-loopback `host`
    without `token`, and `OSError` when `host:port` cannot be bound; uvicorn itself would
    log the failure and exit the process instead. A name that does not resolve is a bind
    error, not a refusal: it could not be served with a token either.
    """
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be from 1 to 65535, got {port}")
    check_token(token)  # UnusableToken (a ValueError): empty, or a placeholder
    socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    check_emulator_bind(host, token)
    probe(host, port)
    uvicorn.Server(_config(state, host, port, "info", token)).run()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class BackgroundServer:
    """The emulator on a real loopback socket, served from a daemon thread.

    Use as a context manager; `url` is the base URL for `anthropic.Anthropic(base_url=...)`
    and `state` the shared `EmulatorState`. The bind rule holds here too: a non-loopback
    `host` needs a `token` (`InsecureBind` otherwise), which then guards `/_emulator/*`.
    """

    def __init__(
        self,
        state: EmulatorState | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        log_level: str = "warning",
        token: str | None = None,
    ) -> None:
        check_emulator_bind(host, token)
        self.state = state if state is not None else EmulatorState()
        self.host = host
        # Bound here and handed to uvicorn, so no other process can take the port between
        # choosing it and serving on it (`free_port` then binding raced under load).
        family = socket.getaddrinfo(host, port or 0, type=socket.SOCK_STREAM)[0][0]
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind((host, port or 0))
        except OSError:
            self._socket.close()
            raise
        self.port: int = self._socket.getsockname()[1]
        self._server = uvicorn.Server(_config(self.state, host, self.port, log_level, token))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="emulator",
            daemon=True,
        )

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
        self._socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
