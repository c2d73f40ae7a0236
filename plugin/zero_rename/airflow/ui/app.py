"""The Commits page: jobs per destination, mounted on Airflow's api-server by the plugin.

Authentication is Airflow's own: a bearer token, or the UI's session cookie
when the page is opened from the UI. Airflow does not protect plugin apps by
itself, so every route depends on ``get_user`` and on access to plugin views.
Which destinations it shows is the admin's choice (:mod:`.scope`): the page's
connection may read far more than that. Its buttons trigger runs of the
``manual_abort`` DAG (:mod:`.actions`) for users Airflow lets trigger it
(:mod:`.airflow_side`), by POST from the page's own origin only.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import AccessView, DagAccessEntity
from airflow.api_fastapi.core_api.security import (
    GetUserDep,
    get_user,
    requires_access_dag,
    requires_access_view,
)
from airflow.sdk import conf
from fastapi import Depends, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from zero_rename.airflow.hooks import ZeroRenameHook
from zero_rename.airflow.links import URL_PREFIX, commits_url
from zero_rename.airflow.ui import actions, airflow_side
from zero_rename.airflow.ui.scope import DESTINATIONS, PREFIXES, SECTION, Scope, refusal
from zero_rename.airflow.ui.view import DestinationView, destination_view, shown_error
from zero_rename.core import (
    Committer,
    Destination,
    StoreConfig,
    is_stuck,
    redact,
    states,
    utcnow,
)
from zero_rename.errors import ConfigError, JobNotFoundError, ZeroRenameError
from zero_rename.formatting import human_bytes, human_count, human_duration

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


def page_committer(url: str) -> Committer:
    """A committer of ``url`` through the page's connection.

    Raises:
        ZeroRenameError: the destination or the connection cannot be used (said as
            :func:`connection_error` says it, for a connection).
    """
    conn_id = conf.get(SECTION, "aws_conn_id", fallback="aws_default") or "aws_default"
    try:
        store = ZeroRenameHook(aws_conn_id=conn_id, store_config=PAGE_STORE).store()
    except Exception as exc:  # a malformed connection (its endpoint, say)
        raise ConfigError(connection_error(conn_id, exc)) from None
    return Committer(Destination.parse(url), store=store)


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
    acting: dict[str, Any] | None = None,
) -> HTMLResponse:
    html = _templates.get_template("commits.html").render(
        views=views or [],
        selected=job,
        limit=limit,
        page_url=commits_url(),
        configured=scope.destinations,
        refused=refused,
        **(acting or {"offers": {}}),
    )
    return HTMLResponse(html, status_code=status)


# One format for numbers on the whole page, the command line's.
_templates.filters["bytes"] = lambda count, missing="—": human_bytes(count, missing=missing)
_templates.filters["number"] = lambda count, missing="—": human_count(count, missing=missing)
_templates.filters["duration"] = lambda secs, missing="—": human_duration(secs, missing=missing)

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
    user: GetUserDep,
    dest: Destinations = None,
    job: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_JOBS)] = 50,
    action: Annotated[str | None, Query(max_length=40)] = None,
    triggered: Annotated[str | None, Query(max_length=250)] = None,
) -> HTMLResponse:
    """Jobs of the given destinations (``dest``, repeatable) or of the configured
    ones; a destination outside :func:`page_scope` is refused (403). ``action``
    (with ``job``) shows the confirmation of that action on the job; ``triggered``
    names the manual_abort run the last one created."""
    scope = page_scope()
    destinations = requested(dest, scope) if dest else list(scope.destinations)
    if isinstance(destinations, HTMLResponse):
        return destinations
    views = load_views(destinations, job, limit) if destinations else []
    acting = page_actions(user, views, job, action, triggered)
    return render(scope, views, job, limit, acting=acting)


@app.get(
    "/",
    response_class=HTMLResponse,
    dependencies=[Depends(requires_access_view(AccessView.PLUGINS))],
)
def index(user: GetUserDep, dest: Destinations = None, job: str | None = None) -> HTMLResponse:
    return commits_page(user, dest=dest, job=job)


@dataclass(frozen=True)
class Triggered:
    run_id: str
    run_url: str  # in Airflow's UI


def page_actions(
    user: BaseUser,
    views: list[DestinationView],
    job: str | None,
    action: str | None,
    run: str | None,
) -> dict[str, Any]:
    """What the page offers to do (nothing for a user who may not trigger
    manual_abort, or where it is not deployed), the confirmation asked for, and
    the run the last confirmation triggered."""
    dag = airflow_side.abort_dag()
    allowed = dag.deployed and airflow_side.may_trigger(user)
    found: dict[str, Any] = {
        "offers": {},
        "abort_dag": dag,
        "abort_dag_id": actions.ABORT_DAG,
        "actions_url": airflow_path(URL_PREFIX + "/actions"),
        "triggered": Triggered(run, airflow_path(run_path(run))) if run else None,
    }
    if allowed:
        found["offers"] = {k: v for view in views for k, v in actions.offers(view).items()}
    if action and job:
        if not dag.deployed:
            found["confirm"] = f"the DAG {actions.ABORT_DAG} is not deployed in this Airflow"
        elif not allowed:
            found["confirm"] = (
                f"your Airflow role may not trigger {actions.ABORT_DAG}: ask an admin, or run "
                "the command the page names"
            )
        else:
            view = next((v for v in views if any(j.job_id == job for j in v.jobs)), None)
            found["confirm"] = (
                actions.confirmation(view, job, action) if view else f"no job {job[:40]!r} here"
            )
    return found


def airflow_path(path: str) -> str:
    """``path`` under ``[api] base_url``'s path, as the page's own links are."""
    return commits_url()[: -len(URL_PREFIX + "/commits")] + path


def run_path(run_id: str) -> str:
    return f"/dags/{quote(actions.ABORT_DAG, safe='')}/runs/{quote(run_id, safe='')}"


@app.post(
    "/actions",
    dependencies=[
        Depends(requires_access_view(AccessView.PLUGINS)),
        # Airflow's own check, as its REST API makes before it triggers a run: 403 otherwise.
        Depends(requires_access_dag("POST", DagAccessEntity.RUN, param_dag_id=actions.ABORT_DAG)),
    ],
)
def act(
    request: Request,
    user: GetUserDep,
    dest: Annotated[str, Form(max_length=4096)] = "",
    job: Annotated[str, Form(max_length=100)] = "",
    action: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Trigger manual_abort for one job, then show the page at it (303): the
    confirmation's form posts here. Refused (403) unless it came from the page's
    own origin; the job is read again, and the action refused (409) unless it
    still fits the job's state."""
    scope = page_scope()
    if not airflow_side.same_origin(request):
        return render(scope, status=403, refused="Refused: the request did not come from this page")
    checked = checked_action(scope, dest, job, action)
    if isinstance(checked, HTMLResponse):
        return checked
    url, job_id, chosen = checked
    try:
        run_id = airflow_side.trigger(chosen, url, job_id, user)
    except airflow_side.TriggerError as exc:
        return render(scope, status=exc.status, refused=f"Not triggered: {exc}")
    target = commits_url(url, job_id) + f"&triggered={quote(run_id, safe='')}#triggered"
    return RedirectResponse(target, status_code=303)


def checked_action(
    scope: Scope, dest: str, job: str, name: str
) -> tuple[str, str, actions.Action] | HTMLResponse:
    """The destination, job id and action of a request to act, checked against the
    page's scope and the job's record as it is now; else the page refusing it."""
    wanted = requested([dest], scope)
    if isinstance(wanted, HTMLResponse):
        return wanted
    chosen = actions.ACTIONS.get(name)
    try:
        job_id = str(uuid.UUID(job))
    except ValueError:
        job_id = ""
    if chosen is None or not job_id:
        return render(scope, status=400, refused="Malformed request: a job id and an action")
    try:
        committer = page_committer(wanted[0])
    except ZeroRenameError as exc:
        return render(scope, status=502, refused=f"Cannot read the job: {exc}")
    try:
        record = committer.job(job_id)
    except ZeroRenameError as exc:
        status = 404 if isinstance(exc, JobNotFoundError) else 502
        shown = shown_error(exc, committer.store.endpoint_url)
        return render(scope, status=status, refused=f"Cannot read the job: {shown}")
    failed = actions.has_failed_step(s.status for s in record.steps.values())
    stuck = is_stuck(record, utcnow())
    if chosen not in actions.offered(record.state, stuck, failed):
        label = states.JobState(record.state).label
        return render(
            scope, status=409, refused=f"Job {job_id} is {label}: nothing to {chosen.label.lower()}"
        )
    return wanted[0], job_id, chosen


@app.get(
    "/task",
    response_class=HTMLResponse,
    dependencies=[
        Depends(requires_access_view(AccessView.PLUGINS)),
        Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE)),
    ],
)
def task_tab(
    dag_id: Annotated[str, Query(max_length=250)],
    run_id: Annotated[str, Query(max_length=250)],
    task_id: Annotated[str, Query(max_length=250)],
    map_index: Annotated[str, Query(max_length=20)] = "-1",
) -> Response:
    """The "Commits" tab of a task instance in Airflow's UI: the page at the task's
    job (the task's own "Commits" link, 303), or a line saying it has none."""
    index = int(map_index) if map_index.lstrip("-").isdigit() else -1  # "{MAP_INDEX}": unmapped
    link = airflow_side.task_link(dag_id, run_id, task_id, index)
    if link:
        return RedirectResponse(link, status_code=303)
    html = _templates.get_template("no_job.html").render(
        task_id=task_id, run_id=run_id, page_url=commits_url()
    )
    return HTMLResponse(html)
