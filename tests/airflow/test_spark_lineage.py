"""The daily DAG's Spark application under OpenLineage's own Spark listener.

With ``[openlineage] spark_inject_parent_job_info`` on, the stage passes its run
to ``spark-submit`` (test_daily_dag.py checks the command line). What the
listener does with it is checked here, with the real ``openlineage-spark`` jar
resolved from Maven Central and configured as a cluster would configure it, in
``spark-defaults.conf``: the application's run is a child of the stage's run,
under the DAG run, and the write's run a child of the application's. Spark's
listener names no dataset for a Python data source's write, so the dataset
remains the commit step's (``docs/airflow.md``).
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench.peers.jars import MAVEN_CENTRAL, OPENLINEAGE_SPARK, cache_dir, spark_conf
from tests.airflow import lineage
from tests.airflow.dagruns import run_dag
from tests.airflow.environment import SPARK_CONF_DIR
from tests.airflow.test_daily_dag import DAG_ID, daily, rows_by_file
from tests.helpers import pending
from zero_rename.core.committer import Committer
from zero_rename.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.extended]

__all__ = ["daily"]  # the fixture, shared with the daily DAG's tests

ROWS = 300
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"


@pytest.fixture
def spark_events(tmp_path: Path) -> Path:
    """The DAG tests' Spark settings, plus the listener writing to a file."""
    _need_the_jar()
    events = tmp_path / "spark-events.jsonl"
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    settings = {
        **spark_conf((OPENLINEAGE_SPARK,)),
        "spark.extraListeners": LISTENER,
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(events),
    }
    defaults = (SPARK_CONF_DIR / "spark-defaults.conf").read_text()
    extra = "".join(f"{name} {value}\n" for name, value in settings.items())
    (conf_dir / "spark-defaults.conf").write_text(defaults + extra)
    return events


@pytest.mark.timeout(900)
def test_sparks_own_lineage_hangs_under_the_stage_and_names_no_dataset(
    daily: Committer, spark_events: Path, s3_server: EmbeddedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After the daily fixture's spark_env, which points spark-submit at the suite's.
    monkeypatch.setenv("SPARK_CONF_DIR", str(spark_events.parent / "spark-conf"))
    result = run_dag(DAG_ID, "2024-04-01", {"rows": ROWS})
    assert result.state == "success", result.states
    assert sum(rows_by_file(daily).values()) == ROWS and pending(daily) == []

    airflow = lineage.events(DAG_ID, result.run_id)
    stage = lineage.first(airflow, "stage")
    dag_run = stage["run"]["facets"]["parent"]["run"]["runId"]
    spark = [json.loads(line) for line in spark_events.read_text().splitlines() if line]
    stage_job = {"namespace": stage["job"]["namespace"], "name": stage["job"]["name"]}
    application = [e for e in spark if _parent(e).get("job") == stage_job]
    assert application, [(e["job"]["name"], _parent(e)) for e in spark]
    app_run = application[0]["run"]["runId"]
    # The application's run is the stage's child, and the DAG run its root.
    for event in application:
        parent = _parent(event)
        assert parent["run"]["runId"] == stage["run"]["runId"]
        assert parent["root"]["run"]["runId"] == dag_run
        assert parent["root"]["job"]["name"] == DAG_ID
    assert {e["eventType"] for e in application} == {"START", "COMPLETE"}

    # The write's run is the application's child. The listener cannot name a
    # Python data source's output, so no Spark event names a dataset: the
    # destination's writer in the lineage is the commit step, with what it wrote.
    writes = [e for e in spark if "zero_rename" in e["job"]["name"]]
    assert writes and {e["eventType"] for e in writes} >= {"START", "COMPLETE"}
    assert all(_parent(e)["run"]["runId"] == app_run for e in writes)
    assert all(e.get("outputs", []) == [] for e in spark)
    (output,) = lineage.last(airflow, "commit")["outputs"]
    assert (output["namespace"], output["name"]) == (f"s3://{daily.dest.bucket}", "events")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == ROWS
    for secret in (s3_server.secret_key, s3_server.endpoint_url):
        assert secret not in spark_events.read_text()


def _need_the_jar() -> None:
    """Skip where the listener's jar is neither cached nor downloadable (offline);
    fail instead when CI demands every test."""
    group, artifact, version = OPENLINEAGE_SPARK.split(":")
    if (cache_dir() / "jars" / f"{group}_{artifact}-{version}.jar").is_file():
        return
    pom = f"{MAVEN_CENTRAL}{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    try:
        urllib.request.urlopen(urllib.request.Request(pom, method="HEAD"), timeout=10).close()
    except OSError as exc:
        why = (
            f"{artifact} {version}: not in the jar cache, and Maven Central did not answer ({exc})"
        )
        if os.environ.get("ZERO_RENAME_TESTS_REQUIRE_ALL"):
            pytest.fail(why)
        pytest.skip(why)


def _parent(event: dict[str, Any]) -> dict[str, Any]:
    parent: dict[str, Any] = event["run"]["facets"].get("parent", {})
    return parent
