"""`BackgroundServer` holds its port from the moment it is made: it binds the socket itself
and hands it to uvicorn. Choosing a free port and binding it later raced when many
processes started emulators at once (the hostile-probe test saw "address already in use"
and a traceback)."""

from __future__ import annotations

import socket

import httpx
import pytest
from sessiongen.emulator import BackgroundServer


def test_the_port_is_held_from_construction_to_stop() -> None:
    server = BackgroundServer()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
            with pytest.raises(OSError):
                other.bind(("127.0.0.1", server.port))
        with server:
            assert httpx.get(f"{server.url}/_emulator/clock", timeout=10).status_code == 200
    finally:
        server.stop()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", server.port))  # released when it stopped


def test_a_taken_port_is_an_os_error_at_once() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            BackgroundServer(port=taken.getsockname()[1])
