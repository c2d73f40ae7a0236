"""The daily DAG's lineage as a catalog receives it, Spark's own events included.

Airflow's OpenLineage provider posts to one HTTP endpoint (a catalog such as
Marquez; here a server of the test's that keeps what it receives). With
``[openlineage] spark_inject_parent_job_info`` and ``spark_inject_transport_info``
on, the stage passes its run and that transport, API key included, to
``spark-submit``; the application runs OpenLineage's own Spark listener (the real
``openlineage-spark`` jar, resolved from Maven Central), configured as a cluster
configures it, in ``spark-defaults.conf``, with no transport of its own. So
Spark's events reach the same endpoint with the same key: the application's run a
child of the stage's run, under the DAG run, and the write's run a child of the
application's. Spark's listener names no dataset for a Python data source's
write, so the destination's writer is the commit step (``docs/airflow.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.peers.jars import MAVEN_CENTRAL, OPENLINEAGE_SPARK, cache_dir, spark_conf
from tests.airflow import lineage
from tests.airflow.environment import SPARK_CONF_DIR
from tests.airflow.test_daily_dag import DAG_ID, REPO, daily, rows_by_file
from tests.helpers import pending
from tests.lineage_catalog import Catalog, running_catalog
from zero_rename.core.committer import Committer
from zero_rename.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.extended]

__all__ = ["daily"]  # the fixture, shared with the daily DAG's tests

ROWS = 300
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
API_KEY = "lineage-key-4f1c"  # the catalog's key: it must reach Spark, and no event


@pytest.fixture
def catalog() -> Iterator[Catalog]:
    with running_catalog() as server:
        yield server


@pytest.fixture
def listener_conf(tmp_path: Path) -> Path:
    """The DAG tests' Spark settings and the listener, without a transport."""
    _need_the_jar()
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    settings = {**spark_conf((OPENLINEAGE_SPARK,)), "spark.extraListeners": LISTENER}
    defaults = (SPARK_CONF_DIR / "spark-defaults.conf").read_text()
    extra = "".join(f"{name} {value}\n" for name, value in settings.items())
    (conf_dir / "spark-defaults.conf").write_text(defaults + extra)
    return conf_dir


@pytest.mark.timeout(900)
def test_sparks_lineage_reaches_the_catalog_under_the_stage_and_names_no_dataset(
    daily: Committer,
    catalog: Catalog,
    listener_conf: Path,
    s3_server: EmbeddedS3,
) -> None:
    transport = catalog.transport(API_KEY)
    # A fresh interpreter: the provider reads its transport once per process.
    ran = subprocess.run(
        [sys.executable, "-m", "tests.airflow.run_day", "2024-04-01", str(ROWS)],
        cwd=REPO,
        env={
            **os.environ,  # the daily fixture's destination, the DAG tests' Spark
            "SPARK_CONF_DIR": str(listener_conf),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__SPARK_INJECT_TRANSPORT_INFO": "True",
        },
        capture_output=True,
        timeout=800,
    )
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")[-3000:]
    assert sum(rows_by_file(daily).values()) == ROWS and pending(daily) == []

    airflow = [e for _, e in catalog.events if _engine(e) == "airflow"]
    spark = [e for _, e in catalog.events if _engine(e) == "spark"]
    assert spark, [e["job"]["name"] for _, e in catalog.events]
    # Spark's events came with the catalog's key, passed on by the stage's submit.
    assert {key for key, e in catalog.events} == {f"Bearer {API_KEY}"}

    stage = lineage.first(airflow, "stage")
    dag_run = stage["run"]["facets"]["parent"]["run"]["runId"]
    stage_job = {"namespace": stage["job"]["namespace"], "name": stage["job"]["name"]}
    application = [e for e in spark if _parent(e).get("job") == stage_job]
    assert application, [(e["job"]["name"], _parent(e)) for e in spark]
    # The application's run is the stage's child, and the DAG run its root.
    for event in application:
        parent = _parent(event)
        assert parent["run"]["runId"] == stage["run"]["runId"]
        assert (parent["root"]["run"]["runId"], parent["root"]["job"]["name"]) == (dag_run, DAG_ID)
    assert {e["eventType"] for e in application} == {"START", "COMPLETE"}

    # The write's run is the application's child. The listener cannot name a
    # Python data source's output, so no Spark event names a dataset: the
    # destination's writer in the lineage is the commit step, with what it wrote.
    app_run = application[0]["run"]["runId"]
    writes = [e for e in spark if "zero_rename" in e["job"]["name"]]
    assert writes and {e["eventType"] for e in writes} >= {"START", "COMPLETE"}
    assert all(_parent(e)["run"]["runId"] == app_run for e in writes)
    assert all(e.get("outputs", []) == [] for e in spark)
    (output,) = lineage.last(airflow, "commit")["outputs"]
    assert (output["namespace"], output["name"]) == (f"s3://{daily.dest.bucket}", "events")
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == ROWS
    # Neither the key nor the store's credentials or endpoint are in any event.
    for secret in (API_KEY, s3_server.secret_key, s3_server.endpoint_url):
        assert not [b for b in catalog.bodies if secret.encode() in b]


def _engine(event: dict[str, Any]) -> str:
    facet = event["run"]["facets"].get("processing_engine", {})
    return str(facet.get("name", "")).lower()


def _parent(event: dict[str, Any]) -> dict[str, Any]:
    parent: dict[str, Any] = event["run"]["facets"].get("parent", {})
    return parent


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
