"""The Commits page on a real ``airflow api-server``, seen in headless Chromium.

The api-server runs with its own password file and JWT secret on a free
loopback port. The page must refuse anonymous requests, and show what the
store holds: jobs, their states, counts, pending uploads and ``_SUCCESS``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from tests.airflow.browser import Browser
from tests.airflow.environment import AIRFLOW_HOME, VENV_BIN
from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.model import JobRecord
from zero_rename.embedded_s3 import EmbeddedS3, free_ports, stop_process_group

pytestmark = pytest.mark.browser


STARTUP_SECONDS = 180


@dataclass
class ApiServer:
    url: str
    token: str


@pytest.fixture(scope="module")
def api_server(airflow_env: EmbeddedS3) -> Iterator[ApiServer]:
    port = free_ports(1)[0]
    password = secrets.token_urlsafe(16)
    passwords = AIRFLOW_HOME / "api-passwords.json"
    passwords.write_text(json.dumps({"admin": password}))
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
    }
    url = f"http://127.0.0.1:{port}"
    with open(AIRFLOW_HOME / "api-server.log", "wb") as log:
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "airflow"),
                "api-server",
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                "1",
                "--apps",
                "core",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_healthy(url, proc)
        response = httpx.post(
            f"{url}/auth/token", json={"username": "admin", "password": password}, timeout=30
        )
        response.raise_for_status()
        yield ApiServer(url, response.json()["access_token"])
    finally:
        stop_process_group(proc, timeout=30)


def wait_until_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert proc.poll() is None, (AIRFLOW_HOME / "api-server.log").read_text()[-3000:]
        try:
            if httpx.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"api-server did not answer within {STARTUP_SECONDS} s")


@dataclass
class Jobs:
    committed: JobRecord
    staged: JobRecord
    aborted: JobRecord


@pytest.fixture
def jobs(airflow_env: EmbeddedS3, committer: Committer) -> Jobs:
    options = {"partition_columns": "dt", "conflict_mode": "replace"}
    committed = committer.setup_job(options, origin=ORIGIN)
    for i in range(3):
        write_task(committer, committed, f"{i:05d}", {"2024-07-01": b"c" * 500}, rows=7)
    committer.commit_job(committed.job_id)
    staged = committer.setup_job(options)
    manifests = [
        write_task(committer, staged, f"{i:05d}", {"2024-07-02": b"s" * 300}, publish=False, rows=5)
        for i in range(2)
    ]
    committer.save_stage_manifest(
        staged.job_id, [m for m in manifests if m is not None], engine="spark"
    )
    aborted = committer.setup_job(options)
    write_task(committer, aborted, "00000", {"2024-07-03": b"a" * 10})
    committer.abort_job(aborted.job_id, reason="step(s) stage failed (DAG daily, run r1)")
    return Jobs(committed, staged, aborted)


ORIGIN = {
    "airflow_dag_id": "daily_partitioned_write",
    "airflow_run_id": "manual__2024-07-01",
    "airflow_task_id": "setup_job",
}


def page_url(server: ApiServer, committer: Committer, job: str | None = None) -> str:
    query = {"dest": committer.dest.url, **({"job": job} if job else {})}
    return f"{server.url}/zero-rename/commits?{urlencode(query)}"


def test_the_page_requires_airflow_authentication(
    api_server: ApiServer, committer: Committer
) -> None:
    url = page_url(api_server, committer)
    assert httpx.get(url, timeout=60).status_code == 401
    assert httpx.get(
        url, headers={"Authorization": "Bearer not-a-token"}, timeout=60
    ).status_code in (401, 403)
    authorized = httpx.get(url, headers={"Authorization": f"Bearer {api_server.token}"}, timeout=60)
    assert authorized.status_code == 200 and "<h1>Commits</h1>" in authorized.text
    plugins = httpx.get(
        f"{api_server.url}/api/v2/plugins",
        timeout=60,
        headers={"Authorization": f"Bearer {api_server.token}"},
    ).json()
    (plugin,) = [p for p in plugins["plugins"] if p["name"] == "zero_rename"]
    assert plugin["external_views"][0]["href"].endswith("/zero-rename/commits")


def test_the_page_shows_jobs_counts_and_success_in_a_browser(
    api_server: ApiServer, committer: Committer, jobs: Jobs, s3_server: EmbeddedS3, tmp_path: Path
) -> None:
    with Browser() as browser:
        # The UI's session cookie, as the page gets it inside Airflow's UI.
        browser.set_cookie("_token", api_server.token, api_server.url)
        browser.goto(page_url(api_server, committer, jobs.committed.job_id))
        browser.screenshot(tmp_path / "commits.png")
        text = browser.text()
        rows = browser.evaluate("""Object.fromEntries([...document.querySelectorAll('tr.job')]
            .map(r => [r.dataset.jobId, {state: r.dataset.state,
              ...Object.fromEntries([...r.querySelectorAll('[data-field]')]
                 .map(c => [c.dataset.field, c.innerText.trim()]))}]))""")
        success = browser.evaluate("document.getElementById('success-summary').innerText")
        detail = browser.evaluate("document.getElementById('job-detail').innerText")
        html = browser.evaluate("document.documentElement.outerHTML")

    assert "Commits" in text and committer.dest.url in text
    assert int(rows[jobs.committed.job_id].pop("requests")) > 0  # the job commit's
    assert rows[jobs.committed.job_id] == {
        "state": "committed",
        "tasks": "3",
        "files": "3",
        "bytes": "1.5 KiB",
        "rows": "21",
        "pending": "0",
    }
    assert rows[jobs.staged.job_id] == {
        "state": "setup",
        "tasks": "2",
        "files": "2",
        "bytes": "600 B",
        "rows": "10",
        "pending": "2",
        "requests": "—",
    }
    assert rows[jobs.aborted.job_id]["state"] == "aborted"
    assert rows[jobs.aborted.job_id]["pending"] == "0"
    assert jobs.committed.job_id in success and "3 file(s)" in success and "21 row(s)" in success
    assert "dt=2024-07-01" in success
    assert "commit" in detail and "succeeded" in detail
    for secret in (s3_server.secret_key, api_server.token):
        assert secret not in html


def test_airflow_ui_shows_the_page_under_browse(api_server: ApiServer) -> None:
    with Browser() as browser:
        browser.set_cookie("_token", api_server.token, api_server.url)
        browser.goto(f"{api_server.url}/plugin/commits")
        # The UI renders the external view in a frame once its scripts have run.
        frame = "document.querySelector('iframe')"
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline and "Commits" not in text:
            text = (
                browser.evaluate(
                    f"{frame} && {frame}.contentDocument && "
                    f"{frame}.contentDocument.body ? "
                    f"{frame}.contentDocument.body.innerText : ''"
                )
                or ""
            )
            time.sleep(0.3)
        src = browser.evaluate(f"{frame}.src")
    assert src == f"{api_server.url}/zero-rename/commits"
    assert "Commits" in text and "No destination given" in text


def test_the_page_links_jobs_to_their_run_and_says_why_one_was_aborted(
    api_server: ApiServer, committer: Committer, jobs: Jobs
) -> None:
    headers = {"Authorization": f"Bearer {api_server.token}"}
    page = httpx.get(
        page_url(api_server, committer, jobs.aborted.job_id), headers=headers, timeout=60
    ).text
    assert "Aborted: step(s) stage failed (DAG daily, run r1)" in page
    run = "/dags/daily_partitioned_write/runs/manual__2024-07-01/tasks/setup_job"
    assert f'href="{run}"' in page  # the committed job, set up by that run's task
    # The engine's stage is a step of the job, between setup and the orchestrator's steps.
    staged = httpx.get(
        page_url(api_server, committer, jobs.staged.job_id), headers=headers, timeout=60
    ).text
    assert re.search(
        r'class="step step-succeeded" title="spark: 2 task\(s\), 2 file\(s\)">'
        r"\s*stage",
        staged,
    )
