"""The Commits page: jobs per destination, mounted on Airflow's api-server by the plugin.

Authentication is Airflow's own: a bearer token, or the UI's session cookie
when the page is opened from the UI. Airflow does not protect plugin apps by
itself, so every route depends on ``get_user`` and on access to plugin views.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import get_user, requires_access_view
from airflow.sdk import conf
from fastapi import Depends, FastAPI, Query
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from zero_rename.airflow.hooks import ZeroRenameHook
from zero_rename.airflow.links import commits_url
from zero_rename.airflow.ui.view import DestinationView, destination_view
from zero_rename.core.committer import Committer
from zero_rename.core.layout import Destination
from zero_rename.errors import ZeroRenameError
from zero_rename.formatting import human_bytes

MAX_JOBS = 200
_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)


def configured_destinations() -> list[str]:
    """``[zero_rename] destinations``: a comma-separated list shown by default."""
    text = conf.get("zero_rename", "destinations", fallback="") or ""
    return [d.strip() for d in text.split(",") if d.strip()]


def load_views(destinations: list[str], job: str | None, limit: int) -> list[DestinationView]:
    hook = ZeroRenameHook(
        aws_conn_id=conf.get("zero_rename", "aws_conn_id", fallback="aws_default")
    )
    store = hook.store()
    views = []
    for url in dict.fromkeys(destinations):
        try:
            committer = Committer(Destination.parse(url), store=store)
        except ZeroRenameError as exc:
            views.append(DestinationView(url=url, error=str(exc)))
            continue
        views.append(destination_view(committer, limit, job))
    return views


_templates.filters["bytes"] = lambda count: human_bytes(count, missing="—")

app = FastAPI(
    title="zero-rename commits",
    dependencies=[Depends(get_user)],
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)
Destinations = Annotated[list[str] | None, Query(alias="dest")]


@app.get(
    "/commits",
    response_class=HTMLResponse,
    dependencies=[Depends(requires_access_view(AccessView.PLUGINS))],
)
def commits_page(
    dest: Destinations = None,
    job: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_JOBS)] = 50,
) -> HTMLResponse:
    """Jobs of the given destinations (``dest``, repeatable) or of the configured ones."""
    destinations = dest or configured_destinations()
    views = load_views(destinations, job, limit) if destinations else []
    html = _templates.get_template("commits.html").render(
        views=views,
        selected=job,
        limit=limit,
        page_url=commits_url(),
        configured=configured_destinations(),
    )
    return HTMLResponse(html)


@app.get(
    "/",
    response_class=HTMLResponse,
    dependencies=[Depends(requires_access_view(AccessView.PLUGINS))],
)
def index(dest: Destinations = None, job: str | None = None) -> HTMLResponse:
    return commits_page(dest=dest, job=job)
