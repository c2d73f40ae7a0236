"""The "Commits" extra link: from a task straight to its job on the Commits page."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlparse

from airflow.sdk import BaseOperatorLink, conf

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

# Where the plugin mounts its FastAPI app on the api-server.
URL_PREFIX = "/zero-rename"


def commits_url(destination: str | None = None, job_id: str | None = None) -> str:
    """Path of the Commits page, optionally at one job; honours ``[api] base_url``'s path."""
    base = urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    query = {k: v for k, v in (("dest", destination), ("job", job_id)) if v}
    return f"{base}{URL_PREFIX}/commits" + (f"?{urlencode(query)}" if query else "")


def task_tab_url() -> str:
    """The task instance tab's address; Airflow's UI fills in the placeholders
    (``{MAP_INDEX}`` stays as it is for a task that is not mapped)."""
    tab = commits_url()[: -len("/commits")] + "/task"
    return f"{tab}?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}"


class CommitsLink(BaseOperatorLink):
    """Opens the Commits page at the operator's destination and job."""

    name = "Commits"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        # Evaluated when the task finishes, on the task's rendered fields; the
        # setup operator stores the job id it chose in ``job_id``.
        destination = getattr(operator, "destination", None)
        job_id = getattr(operator, "job_id", None)
        if not isinstance(destination, str) or not destination:
            return ""
        return commits_url(destination, job_id if isinstance(job_id, str) else None)
