"""opencode's HTTP routes over our engine: what `OpencodeAdapter` expects of `opencode serve`
(`GET /global/health`, `POST /session`, `GET /session/{id}`, `GET` and `POST
/session/{id}/message`, `POST /api/session/{id}/generate` answered `{"data": {"text"}}`,
errors as `{"name", "data": {"message"}}`), so the adapter is exercised where opencode is
not installed. Shapes follow docs/conformance.md's reading of opencode's routes, not
opencode's code: the adapter against a real `opencode serve` is
`test_a_running_opencode_serve` in test_conform.py."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sessiongen.errors import SessiongenError
from sessiongen.model import AssistantMessage, Message, TextPart
from sessiongen.session.engine import SessionEngine


def _message(session_id: str, message: Message) -> dict[str, Any]:
    role = "assistant" if isinstance(message, AssistantMessage) else "user"
    parts = getattr(message, "parts", ())
    return {
        "info": {"id": message.id, "sessionID": session_id, "role": role},
        "parts": [{"type": "text", "text": p.text} for p in parts if isinstance(p, TextPart)],
    }


def opencode_facade(engine: SessionEngine, *, generate: bool = True) -> FastAPI:
    """The routes over `engine`; without `generate`, as a release before #37433 (its
    OpenAPI document at `/doc` lists no generate route)."""
    app = FastAPI(openapi_url="/doc", docs_url=None, redoc_url=None)

    def row(session_id: str) -> dict[str, Any]:
        record = engine.get_session(session_id)
        return {
            "id": session_id,
            "title": "facade",
            "tokens": record.usage.model_dump(),
            "time": {"created": 0, "updated": record.session.revision},
        }

    @app.exception_handler(SessiongenError)
    async def named_error(request: Request, exc: SessiongenError) -> JSONResponse:
        body = {"name": type(exc).__name__, "data": {"message": str(exc)}}
        return JSONResponse(body, status_code=exc.problem_status)

    @app.get("/global/health")
    async def health() -> dict[str, Any]:
        return {"healthy": True, "version": "facade"}

    @app.post("/session")
    async def create(body: dict[str, Any]) -> dict[str, Any]:
        return row(engine.create_session(str(body.get("agent") or "forge")).id)

    @app.get("/session/{session_id}")
    async def get(session_id: str) -> dict[str, Any]:
        return row(session_id)

    @app.get("/session/{session_id}/message")
    async def messages(session_id: str) -> list[dict[str, Any]]:
        return [_message(session_id, m) for m in engine.get_session(session_id).messages]

    @app.post("/session/{session_id}/message")
    async def prompt(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        text = "".join(str(p.get("text", "")) for p in body["parts"] if p.get("type") == "text")
        await engine.run(session_id, text)
        last = engine.get_session(session_id).messages[-1]
        return _message(session_id, last)

    if generate:

        @app.post("/api/session/{sessionID}/generate")
        async def generate_text(sessionID: str, body: dict[str, Any]) -> dict[str, Any]:
            result = await engine.generate(sessionID, str(body["prompt"]))
            return {"data": {"text": result.text}}

    return app
