"""Projects: the number a native crash reporter's upload URL names, and the sku it stands for."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.factory import current
from api.params import DIGITS, Cursor
from api.requests import JsonBody
from api.resolver import answer, create_resolver, json_response, posted
from ports.telemetry import instrumented
from reporters import projects
from reporters.projects import MAX_PROJECT_ID, MAX_PROJECTS, Project, ProjectBody, ProjectPage

app = create_resolver()
PROJECT = JsonBody(ProjectBody)
# named as the contract names it, so that an error's field is `projectId`
ProjectId = Annotated[int, Path(alias="projectId", ge=1, le=MAX_PROJECT_ID, description="a Sentry DSN's last part"),
                      DIGITS]


@app.get("/v1/projects", operation_id="listProjects", summary="The projects by id, with their skus",
         responses={200: answer(ProjectPage, "a page of projects")})
def list_projects(limit: Annotated[int, Query(ge=1, le=MAX_PROJECTS), DIGITS] = 100,
                  cursor: Cursor = None) -> Response[str]:
    return json_response(200, projects.listing(current().projects, limit=limit, cursor=cursor))


@app.put("/v1/projects/<projectId>", operation_id="putProject", summary="Create a project or move it to a sku",
         description="needs a server key; the uploads of native crash reporters (a Sentry DSN "
                     "`http://<ingest key>@<host>/<projectId>`) land as reports of its sku",
         openapi_extensions=PROJECT.openapi,
         responses={200: answer(Project, "moved"), 201: answer(Project, "created")})
def put_project(project_id: ProjectId) -> Response[str]:
    created, project = projects.put(current().projects, project_id, PROJECT.one(posted(app.current_event)))
    return json_response(201 if created else 200, project)


@app.get("/v1/projects/<projectId>", operation_id="getProject", responses={200: answer(Project, "the project")})
def get_project(project_id: ProjectId) -> Response[str]:
    return json_response(200, projects.get(current().projects, project_id))


@instrumented
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
