"""What the Commits page asks of Airflow itself: who may trigger ``manual_abort``,
triggering it, whether a request came from the page's own origin, and a task's
"Commits" link.

Permissions are Airflow's: its auth manager decides, for the user the request
authenticated as (a bearer token, or the UI's session cookie), whether they may
create runs of the DAG (``POST`` on its ``RUN`` entity), as Airflow's REST API
asks before it triggers a run. The run is created by ``trigger_dag``, the
function of Airflow's own API that ``airflow dags trigger`` uses, which checks
the ``params`` against the DAG's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.sdk import conf
from fastapi import Request

from zero_rename.airflow.links import CommitsLink
from zero_rename.airflow.ui.actions import ABORT_DAG, Action

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AbortDag:
    """The manual_abort DAG as Airflow knows it: deployed (parsed, not stale), paused."""

    deployed: bool
    paused: bool


def abort_dag() -> AbortDag:
    from airflow.models.dag import DagModel

    model = DagModel.get_current(ABORT_DAG)
    if model is None or model.is_stale:
        return AbortDag(deployed=False, paused=False)
    return AbortDag(deployed=True, paused=bool(model.is_paused))


def may_trigger(user: BaseUser) -> bool:
    """Whether Airflow's auth manager lets ``user`` create runs of manual_abort."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import (
        DagAccessEntity,
        DagDetails,
    )
    from airflow.models.dag import DagModel

    return get_auth_manager().is_authorized_dag(
        method="POST",
        access_entity=DagAccessEntity.RUN,
        details=DagDetails(id=ABORT_DAG, team_name=DagModel.get_team_name(ABORT_DAG)),
        user=user,
    )


class TriggerError(Exception):
    """Airflow refused the run; ``status`` is the HTTP status the page answers with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def trigger(action: Action, destination: str, job_id: str, user: BaseUser) -> str:
    """Create a run of manual_abort for the job, as ``user``; its run id.

    Raises:
        TriggerError: the DAG is not deployed (404), or refused the params (400).
    """
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.exceptions import DagNotFound, ParamValidationError
    from airflow.utils.types import DagRunTriggeredByType

    try:
        run = trigger_dag(
            ABORT_DAG,
            triggered_by=DagRunTriggeredByType.UI,
            triggering_user_name=user.get_name(),
            conf=action.params(destination, job_id),
            note=f"{action.label} job {job_id}, from the Commits page",
        )
    except DagNotFound:
        raise TriggerError(f"the DAG {ABORT_DAG} is not deployed in this Airflow", 404) from None
    except (ParamValidationError, ValueError) as exc:
        raise TriggerError(f"{ABORT_DAG} refused the params: {exc}", 400) from None
    if run is None:  # pragma: no cover - trigger_dag returns None for no DAG bag match only
        raise TriggerError(f"the DAG {ABORT_DAG} is not deployed in this Airflow", 404)
    log.info(
        "Commits page: %s triggered %s run %s (%s job %s at %s)",
        user.get_name(),
        ABORT_DAG,
        run.run_id,
        action.name,
        job_id,
        destination,
    )
    return str(run.run_id)


def same_origin(request: Request) -> bool:
    """Whether a state-changing request may be acted on: it carries its own bearer
    token (no browser sends one by itself), or the browser says it came from a
    page of this origin (``Sec-Fetch-Site``, else ``Origin``, compared with the
    request's host and ``[api] base_url``). The UI's cookie alone proves nothing:
    a page of another site, or of another port on this host, could send it."""
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return True
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return False
    own = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
    base = urlsplit(conf.get("api", "base_url", fallback="") or "")
    if base.scheme and base.netloc:
        own.add(f"{base.scheme}://{base.netloc}")
    return origin in own


def task_link(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The "Commits" link a task recorded when it finished (in XCom, where Airflow
    keeps every operator's extra links); empty if it has none."""
    from airflow.models.taskinstancekey import TaskInstanceKey
    from airflow.serialization.definitions.operatorlink import XComOperatorLink

    link = CommitsLink()
    key = TaskInstanceKey(dag_id, task_id, run_id, map_index=map_index)
    stored: Any = XComOperatorLink(name=link.name, xcom_key=link.xcom_key)
    return str(stored.get_link(None, ti_key=key) or "")
