"""The committed OpenAPI document (docs/openapi.json) is the app's: the routes and bodies
users script against change only on purpose, with the file regenerated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from sessiongen.server.openapi import openapi_document, render

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
REGENERATE = "uv run python -m sessiongen.server.openapi"


@pytest.mark.clause("SG-HTTP-1")
def test_the_committed_openapi_document_is_the_apps(app: FastAPI) -> None:
    fresh = app.openapi()
    assert fresh == openapi_document()  # the document depends on no engine, store or provider
    committed = COMMITTED.read_text(encoding="utf-8")
    assert json.loads(committed) == fresh, (
        f"docs/openapi.json differs from create_app(...).openapi(); regenerate it with "
        f"`{REGENERATE}` (from the repository root) and commit it"
    )
    assert committed == render(fresh), f"docs/openapi.json is not formatted; run `{REGENERATE}`"


@pytest.mark.clause("SG-HTTP-1")
def test_the_document_has_the_routes_users_script_against() -> None:
    document = openapi_document()
    routes = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert routes == {
        ("GET", "/api/health"),
        ("POST", "/api/session"),
        ("GET", "/api/session/{session_id}"),
        ("DELETE", "/api/session/{session_id}"),
        ("GET", "/api/session/{session_id}/messages"),
        ("POST", "/api/session/{session_id}/prompt"),
        ("POST", "/api/session/{session_id}/generate"),
        ("POST", "/api/session/{session_id}/warming"),
        ("GET", "/api/session/{session_id}/warming"),
        ("DELETE", "/api/session/{session_id}/warming"),
    }
    generate = document["paths"]["/api/session/{session_id}/generate"]["post"]
    assert generate["security"] == [{"HTTPBearer": []}]
    answers = generate["responses"]
    assert set(answers["422"]["content"]) == {"application/problem+json"}
    assert answers["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/GenerateResult"
    }
    schemas = document["components"]["schemas"]
    assert schemas["GenerateRequest"]["additionalProperties"] is False
    assert "HTTPValidationError" not in schemas  # 422 is a problem, not FastAPI's shape
    assert "security" not in document["paths"]["/api/health"]["get"]
