"""The Airflow plugin: the Commits page on the api-server, and the operators' extra link."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from zero_rename.airflow.links import URL_PREFIX, CommitsLink, commits_url, task_tab_url
from zero_rename.airflow.ui.app import app


class ZeroRenamePlugin(AirflowPlugin):
    name = "zero_rename"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "zero-rename commits"}]
    # A "Commits" entry under Browse, rendered by the UI in a frame at /plugin/commits.
    external_views = [
        {
            "name": "Commits",
            "href": commits_url(),
            "destination": "nav",
            "category": "browse",
            "url_route": "commits",
            "icon": None,
        },
        # A "Commits" tab on every task instance, beside Logs and Details: the page
        # at the task's job (its "Commits" link), or a line saying it has none.
        {
            "name": "Commits",
            "href": task_tab_url(),
            "destination": "task_instance",
            "url_route": "zero_rename_commits",
            "icon": None,
        },
    ]
    global_operator_extra_links: list[CommitsLink] = []
    operator_extra_links = [CommitsLink()]
