"""dagster-webserver on loopback shows the run's steps, the asset's metadata (ours and
Dagster's standard keys, plotted per partition) and its checks (GraphQL)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dagster.conftest import DEFS, day_config, load_defs
from tests.dagster.ui import graphql, serving
from zero_rename.core.committer import Committer
from zero_rename.embedded_s3 import free_ports

# A webserver of its own and a run: under make test-extended, with `dg dev`.
pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.extended]

STARTUP_SECONDS = 120
RUN_QUERY = """{ runsOrError { ... on Runs { results { runId jobName status
  stepStats { stepKey status } } } } }"""
ASSET_QUERY = """{ assetOrError(assetKey: {path: ["daily_events"]}) { ... on Asset {
  assetMaterializations(limit: 5) { partition runId metadataEntries { label __typename
    ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue }
    ... on TextMetadataEntry { text } } } } } }"""
# The asset's page: its definition's metadata, its checks with the execution for the
# latest materialization (the Checks tab), and the latest materialization of each
# partition asked for (what the Plots tab draws per partition).
NODE_QUERY = """{ assetNodeOrError(assetKey: {path: ["daily_events"]}) { ... on AssetNode {
  hasAssetChecks metadataEntries { label ... on TextMetadataEntry { text } }
  assetChecksOrError { ... on AssetChecks { checks { name blocking
    executionForLatestMaterialization { status runId evaluation { success description
      metadataEntries { label ... on IntMetadataEntry { intValue }
        ... on TextMetadataEntry { text } } } } } } }
  latestMaterializationByPartition(partitions: ["%s"]) { partition runId
    metadataEntries { label __typename ... on IntMetadataEntry { intValue }
      ... on TableSchemaMetadataEntry { schema { columns { name type } } } } } } } }"""
# What Dagster's asset page plots across materializations: numeric entries.
NUMERIC = {"IntMetadataEntry", "FloatMetadataEntry"}
PLOTTED = (
    "files",
    "rows",
    "bytes",
    "tasks",
    "partitions",
    "replaced_files",
    "s3_requests",
    "seconds",
    "commit_seconds",
    "dagster/row_count",
    "dagster/partition_row_count",
)


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dagster-home"
    home.mkdir()
    # No usage reports leave the machine.
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture
def webserver(dagster_home: Path, daily: Committer, tmp_path: Path) -> Iterator[str]:
    (port,) = free_ports(1)
    env = {**os.environ, "ZERO_RENAME_DAGSTER_DESTINATION": daily.dest.url}
    command = [
        str(Path(sys.executable).parent / "dagster-webserver"),
        *("-h", "127.0.0.1", "-p", str(port), "-f", str(DEFS)),
    ]
    # -f imports the defs folder beside the file as dagster_defs.defs: from the root.
    log_path = tmp_path / "webserver.log"
    with serving(command, port, env, DEFS.parents[1], log_path, STARTUP_SECONDS) as url:
        yield url


def test_the_webserver_shows_the_steps_and_the_materialization(
    dagster_spark: None, daily: Committer, dagster_home: Path, webserver: str
) -> None:
    from dagster import DagsterInstance

    defs = load_defs(daily.dest.url)
    with DagsterInstance.get() as instance:  # the webserver's, from DAGSTER_HOME
        steps = defs.resolve_job_def("daily_events_steps").execute_in_process(
            partition_key="2024-01-03", instance=instance
        )
        asset = defs.resolve_job_def("daily_events_job").execute_in_process(
            partition_key="2024-01-04",
            instance=instance,
            run_config=day_config(200),
        )
    assert steps.success and asset.success

    runs = {r["runId"]: r for r in graphql(webserver, RUN_QUERY)["runsOrError"]["results"]}
    seen = {s["stepKey"]: s["status"] for s in runs[steps.run_id]["stepStats"]}
    assert seen == {
        s: "SUCCESS"
        for s in ("setup_job", "stage", "validate", "resolve_conflicts", "commit", "cleanup_job")
    }
    assert runs[asset.run_id]["status"] == "SUCCESS"

    found = graphql(webserver, ASSET_QUERY)["assetOrError"]["assetMaterializations"]
    (event,) = [m for m in found if m["runId"] == asset.run_id]
    meta = {
        e["label"]: e.get("intValue", e.get("floatValue", e.get("text")))
        for e in event["metadataEntries"]
    }
    kinds = {e["label"]: e["__typename"] for e in event["metadataEntries"]}
    assert {name: kinds[name] in NUMERIC for name in PLOTTED} == dict.fromkeys(PLOTTED, True)
    assert meta["partitions"] == 1 and meta["seconds"] > 0 and meta["commit_seconds"] > 0
    assert event["partition"] == "2024-01-04"
    assert meta["rows"] == 200 and meta["files"] >= 1 and meta["s3_requests"] > 0
    assert meta["state"] == "committed" and meta["job_id"] == daily.read_success().job_id
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(found)
    assert_checks_and_partitions(webserver, daily, asset.run_id, meta)


def assert_checks_and_partitions(
    webserver: str, daily: Committer, run_id: str, meta: dict[str, Any]
) -> None:
    """The asset's Checks tab: both checks blocking, both passed for the latest
    materialization; its day's latest materialization (the per-partition plots)
    with Dagster's row counts: the table's two days, the day's own rows."""
    node = graphql(webserver, NODE_QUERY % "2024-01-04")["assetNodeOrError"]
    assert node["hasAssetChecks"]
    defined = {e["label"]: e.get("text") for e in node["metadataEntries"]}
    assert defined["dagster/uri"] == daily.dest.url
    checks = {c["name"]: c for c in node["assetChecksOrError"]["checks"]}
    assert {
        n: (c["blocking"], c["executionForLatestMaterialization"]["status"])
        for n, c in checks.items()
    } == {
        "manifests_valid": (True, "SUCCEEDED"),
        "output_valid": (True, "SUCCEEDED"),
    }
    output = checks["output_valid"]["executionForLatestMaterialization"]
    assert output["runId"] == run_id and output["evaluation"]["success"]
    shown = {
        e["label"]: e.get("text", e.get("intValue"))
        for e in output["evaluation"]["metadataEntries"]
    }
    assert (shown["job_id"], shown["outcome"]) == (meta["job_id"], "valid")

    (day,) = node["latestMaterializationByPartition"]
    assert (day["partition"], day["runId"]) == ("2024-01-04", run_id)
    entries = {e["label"]: e for e in day["metadataEntries"]}
    assert entries["dagster/row_count"]["intValue"] == 1200  # 2024-01-03's 1000, and these 200
    assert entries["dagster/partition_row_count"]["intValue"] == 200
    columns = entries["dagster/column_schema"]["schema"]["columns"]
    assert [c["name"] for c in columns] == ["id", "region", "amount", "event_time", "dt"]
