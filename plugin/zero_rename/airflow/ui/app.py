"""The Commits page: jobs per destination, mounted on Airflow's api-server by the plugin.

Authentication is Airflow's own: a bearer token, or the UI's session cookie
when the page is opened from the UI. Airflow does not protect plugin apps by
itself, so every route depends on ``get_user`` and on access to plugin views.
Which destinations it shows is the admin's choice (:mod:`.scope`): the page's
connection may read far more than that.
"""

from __future__ import annotations

import logging
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
from zero_rename.airflow.ui.scope import DESTINATIONS, PREFIXES, SECTION, Scope, refusal
from zero_rename.airflow.ui.view import DestinationView, destination_view, shown_error
from zero_rename.core import Committer, Destination, StoreConfig, redact
from zero_rename.errors import ConfigError, ZeroRenameError
from zero_rename.formatting import human_bytes

log = logging.getLogger(__name__)

MAX_JOBS = 200
_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)


# The page answers a person waiting: two attempts per request and short timeouts,
# not the commit's six attempts and five-minute reads.
PAGE_STORE = StoreConfig(max_attempts=2, connect_timeout=5.0, read_timeout=30.0)
# A malformed destination's message is cut to this many characters.
MAX_MESSAGE = 300


def page_scope() -> Scope:
    """The destinations shown: ``[zero_rename] destinations`` and those under
    ``[zero_rename] allowed_destination_prefixes``, read afresh on each request."""
    return Scope.from_settings(
        conf.get(SECTION, DESTINATIONS, fallback=""), conf.get(SECTION, PREFIXES, fallback="")
    )


def connection_error(conn_id: str, exc: Exception) -> str:
    """Why the page's connection gave no store (a malformed endpoint, say), without
    its endpoint or secrets. (A connection id that is not defined is not an error:
    the amazon provider's hook falls back to boto3's standard chain.)"""
    # Its own words would quote the endpoint (a malformed one is no URL to find
    # and hide): the type only here, the rest in the api-server's log.
    log.warning("Commits page: connection %r gives no store: %s", conn_id, redact(str(exc)))
    return (
        f"cannot use connection {conn_id!r} (set in [{SECTION}] aws_conn_id): "
        f"{type(exc).__name__}; its endpoint_url, region or credentials are not usable "
        "(details in the api-server's log)"
    )


def load_views(destinations: list[str], job: str | None, limit: int) -> list[DestinationView]:
    conn_id = conf.get(SECTION, "aws_conn_id", fallback="aws_default") or "aws_default"
    urls = list(dict.fromkeys(destinations))
    try:
        store = ZeroRenameHook(aws_conn_id=conn_id, store_config=PAGE_STORE).store()
    except Exception as exc:  # a malformed connection (its endpoint, say): said on the page
        error = connection_error(conn_id, exc)
        return [DestinationView(url=url, error=error) for url in urls]
    views = []
    for url in urls:
        try:
            committer = Committer(Destination.parse(url), store=store)
        except ZeroRenameError as exc:
            views.append(DestinationView(url=url, error=shown_error(exc, store.endpoint_url)))
            continue
        views.append(destination_view(committer, limit, job))
    return views


def requested(dest: list[str], scope: Scope) -> list[str] | HTMLResponse:
    """The ``dest`` parameters as destination URLs, or the page refusing them:
    400 for a malformed one, 403 for one outside the page's scope."""
    wanted = []
    for text in dest:
        try:
            wanted.append(Destination.parse(text))
        except ConfigError as exc:
            message = str(exc)
            if len(message) > MAX_MESSAGE:
                message = message[:MAX_MESSAGE] + "..."
            return render(scope, status=400, refused=f"Malformed destination: {message}")
    outside = [d for d in wanted if not scope.allows(d)]
    if outside:
        return render(scope, status=403, refused=refusal(outside[0]))
    return [d.url for d in wanted]


def render(
    scope: Scope,
    views: list[DestinationView] | None = None,
    job: str | None = None,
    limit: int = 50,
    status: int = 200,
    refused: str = "",
) -> HTMLResponse:
    html = _templates.get_template("commits.html").render(
        views=views or [],
        selected=job,
        limit=limit,
        page_url=commits_url(),
        configured=scope.destinations,
        refused=refused,
    )
    return HTMLResponse(html, status_code=status)


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
    """Jobs of the given destinations (``dest``, repeatable) or of the configured
    ones; a destination outside :func:`page_scope` is refused (403)."""
    scope = page_scope()
    destinations = requested(dest, scope) if dest else list(scope.destinations)
    if isinstance(destinations, HTMLResponse):
        return destinations
    views = load_views(destinations, job, limit) if destinations else []
    return render(scope, views, job, limit)


@app.get(
    "/",
    response_class=HTMLResponse,
    dependencies=[Depends(requires_access_view(AccessView.PLUGINS))],
)
def index(dest: Destinations = None, job: str | None = None) -> HTMLResponse:
    return commits_page(dest=dest, job=job)
