"""The bind rule both servers share: loopback unless a token guards what is served.

`sessiongen serve` (the session API) and `sessiongen emulator` (the admin API under
`/_emulator`) both refuse a non-loopback address without a token, with one check, so the
two cannot drift on what counts as loopback. `probe` binds and releases what uvicorn will
bind, so an address in use is an `OSError` before serving instead of uvicorn's exit.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Callable, Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "InsecureBind",
    "UnusableToken",
    "bearer_token",
    "check_bind",
    "check_token",
    "is_loopback",
    "probe",
    "token_matches",
]

SERVER_TOKEN_ENV = "SESSIONGEN_TOKEN"
EMULATOR_TOKEN_ENV = "SESSIONGEN_EMULATOR_TOKEN"
SERVER_EXPOSES = "anyone who can reach it could run turns on the provider"


class InsecureBind(ValueError):
    """A non-loopback bind address without a token."""


class UnusableToken(ValueError):
    """A token no server should be guarded by: empty, or a placeholder copied from the docs
    (`...`, `<token>`, `changeme`), which anyone who read the docs could send."""


PLACEHOLDER_WORDS = frozenset({"token", "changeme", "change-me", "secret", "your-token"})
"""Tokens that are words from a how-to rather than a secret (compared case-blind)."""
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe())'"


def check_token(token: str | None, source: str = "the token") -> None:
    """Refuse (`UnusableToken`) a token that guards nothing: empty, or a placeholder (no
    letter or digit, as `...`; in angle brackets, as `<token>`; or a word of
    `PLACEHOLDER_WORDS`). `source` names where it came from (`argument --token`, a
    variable) in the message. None (no token) passes: `check_bind` decides whether one is
    needed. Both servers and their command line check with this."""
    if token is None:
        return
    if not token:
        raise UnusableToken(f"{source}: must not be empty")
    placeholder = (
        not any(c.isalnum() for c in token)
        or (token.startswith("<") and token.endswith(">"))
        or token.casefold() in PLACEHOLDER_WORDS
    )
    if placeholder:
        raise UnusableToken(
            f"{source}: {token!r} is a placeholder, not a token; make one with {MAKE_TOKEN}"
        )


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback address (an unresolvable name is not
    loopback; the empty host binds every interface)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def check_bind(
    host: str,
    token: str | None,
    *,
    token_env: str = SERVER_TOKEN_ENV,
    exposes: str = SERVER_EXPOSES,
) -> None:
    """Refuse (`InsecureBind`) to serve a non-loopback address without a token.

    `token_env` names the variable the refusal tells the user to set and `exposes` what an
    unguarded server would hand to anyone on the network; the defaults are the session
    server's, the emulator passes its own.
    """
    if token is None and not is_loopback(host):
        raise InsecureBind(
            f"refusing to bind {host!r} without a token: it is not a loopback address, and "
            f"{exposes}; set {token_env} (or --token), or bind 127.0.0.1"
        )


def probe(host: str, port: int) -> None:
    """Bind and release every address uvicorn's asyncio server will bind, with its options
    (SO_REUSEADDR, v6-only), so the probe refuses exactly what uvicorn would. A port taken in
    the instant between probe and serve still ends in uvicorn's exit."""
    for family, kind, proto, _, address in socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The credentials of an ASGI request's `Authorization: Bearer …` header (b"" if none)."""
    given = b""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            if scheme.lower() == b"bearer":
                given = credentials.strip()
    return given


def token_matches(given: bytes, token: bytes) -> bool:
    """The token check both servers make, in constant time."""
    return hmac.compare_digest(given, token)


class BearerGate:
    """The one bearer check of both servers, as ASGI middleware: every HTTP request whose
    path `is_open` does not admit needs `Authorization: Bearer <token>`, compared in
    constant time and checked before the body is read. A refusal is the server's own 401,
    built by `refusal(detail, scope)` in its error shape (`detail` says whether a token
    came: "no bearer token" or "a wrong bearer token")."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        is_open: Callable[[str], bool],
        refusal: Callable[[str, Scope], ASGIApp],
    ) -> None:
        self.app = app
        self.token = token.encode()
        self.is_open = is_open
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.is_open(str(scope["path"])):
            await self.app(scope, receive, send)
            return
        given = bearer_token(scope["headers"])
        if token_matches(given, self.token):
            await self.app(scope, receive, send)
            return
        detail = "a wrong bearer token" if given else "no bearer token"
        await self.refusal(detail, scope)(scope, receive, send)
