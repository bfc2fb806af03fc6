"""The API's OpenAPI document: FastAPI's, with a job's body typed as `JobSpec`.

The create and update routes read their body as JSON and validate it as a whole definition
(apps/api/schemas.py says why); here their request body is declared as `JobSpec`, whose schema
and the models it uses join the document's components. `python -m apps.api.openapi_file` prints
the document; docs/openapi.json is its copy in the repository, kept equal by a test.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from apps.api.schemas import spec_schemas
from kadence.connections import CREDENTIAL

JOB_BODIES = (("/v1/jobs/{job_id}", "post"), ("/v1/jobs/{job_id}", "put"))
CONNECTION_BODY = ("/v1/connections/{name}", "put")


def install(app: FastAPI) -> None:
    """Serve the document with the job body typed (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in spec_schemas().items():
        if name in components and components[name] != schema:
            raise RuntimeError(f"two schemas named {name} in the OpenAPI document")
        components[name] = schema
    for path, method in JOB_BODIES:
        body = doc["paths"][path][method]["requestBody"]
        body["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/JobSpec"}
    credential = CREDENTIAL.json_schema(ref_template="#/components/schemas/{model}")
    for name, schema in credential.pop("$defs", {}).items():
        components[name] = schema
    components["Credential"] = credential
    body = doc["paths"][CONNECTION_BODY[0]][CONNECTION_BODY[1]]["requestBody"]
    body["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/Credential"}
    return doc
