"""``dg dev`` from the repository's root, as a newcomer starts Dagster: the project's
code location loads, and a day materialized through the webserver's API, as the
Materialize button does, is run by the instance in a process of its own (its
own Spark) and committed once. Opt-in (make test-extended): about 40 s."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dagster.conftest import DEFS, day_config
from tests.dagster.ui import graphql, serving
from tests.helpers import pending_in_bucket
from zero_rename.core.committer import Committer
from zero_rename.embedded_s3 import free_ports

pytestmark = [pytest.mark.extended, pytest.mark.dagster, pytest.mark.spark]

ROOT = DEFS.parents[1]
STARTUP_SECONDS = 180
RUN_SECONDS = 300
DAY = "2024-02-01"
LOCATION = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on RepositoryLocation { repositories { name
    jobs { name } assetNodes { assetKey { path } } } } ... on PythonError { message } } } } } }"""
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
STATUS = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"""


@pytest.fixture
def dg_dev(tmp_path: Path, daily: Committer) -> Iterator[str]:
    home = tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (port,) = free_ports(1)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ZERO_RENAME_DAGSTER_DESTINATION": daily.dest.url,
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    command = [str(Path(sys.executable).parent / "dg"), "dev", "--port", str(port)]
    with serving(command, port, env, ROOT, tmp_path / "dg-dev.log", STARTUP_SECONDS) as url:
        yield url


def test_dg_dev_loads_the_project_and_its_materialize_commits_the_day_once(
    dg_dev: str, daily: Committer
) -> None:
    (entry,) = graphql(dg_dev, LOCATION)["workspaceOrError"]["locationEntries"]
    assert (entry["name"], entry["loadStatus"]) == ("definitions.py", "LOADED")
    (repository,) = entry["locationOrLoadError"]["repositories"]
    assert {"daily_events_job", "daily_events_steps", "manual_abort_job"} <= {
        j["name"] for j in repository["jobs"]
    }
    assert [n["assetKey"]["path"] for n in repository["assetNodes"]] == [["daily_events"]]

    launched = graphql(
        dg_dev,
        LAUNCH,
        params={
            "selector": {
                "repositoryLocationName": entry["name"],
                "repositoryName": repository["name"],
                "jobName": "daily_events_job",
            },
            "runConfigData": day_config(300),
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": DAY}]},
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + RUN_SECONDS
    while (status := graphql(dg_dev, STATUS, id=run_id)["runOrError"]["status"]) not in (
        "SUCCESS",
        "FAILURE",
        "CANCELED",
    ):
        assert time.monotonic() < deadline, status
        time.sleep(1)
    assert status == "SUCCESS"

    (job,) = daily.jobs()
    assert job.state == "committed"
    success = daily.read_success()
    assert success is not None and success.job_id == job.job_id
    assert success.partitions == (f"dt={DAY}",)
    assert sum(f.rows or 0 for f in success.files) == 300 and success.complete_listing
    assert pending_in_bucket(daily) == []
