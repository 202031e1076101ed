"""The HTTP server: sessions, durable turns, `session.generate` and warming over HTTP.

`create_app(engine)` is the FastAPI app over one `SessionEngine`; `serve(...)` runs it under
uvicorn with a store and a provider (what `sessiongen serve` calls). Errors are
application/problem+json with the types of `sessiongen.errors`; the routes and their bodies
are in `docs/openapi.json` (`python -m sessiongen.server.openapi` writes it).
"""

from .app import HEALTH_PATH, MAX_BODY_BYTES, create_app
from .serving import InsecureBind, check_bind, is_loopback, serve

__all__ = [
    "HEALTH_PATH",
    "MAX_BODY_BYTES",
    "InsecureBind",
    "check_bind",
    "create_app",
    "is_loopback",
    "serve",
]
