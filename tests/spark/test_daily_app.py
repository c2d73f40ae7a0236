"""The daily application the Airflow DAG submits.

The tests call its ``main`` in this process, on the suite's Spark session (a
JVM start saved each), where only the session's start and stop differ. Its runs
through ``spark-submit`` are the daily DAG's (tests/airflow), and the plain
stack's, whose stage hands it the S3 endpoint only as a writer option.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import pending_in_bucket
from zero_rename.core.committer import Committer

from spark_support import arrow_table, data_files

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dags" / "apps" / "daily_partitioned_write.py"


class LentSession:
    """The suite's session lent to the application, whose ``stop()`` at the end
    of a run must leave it running for the tests after."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def stop(self) -> None:
        pass


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("daily_partitioned_write_app", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def app(spark: Any, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The application as a module, running on the suite's session."""
    module = load_app()
    monkeypatch.setattr(module, "start_spark", lambda day: LentSession(spark))
    return module


def test_bad_arguments_exit_2_before_spark_starts(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = load_app()

    def no_spark(day: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(app, "start_spark", no_spark)
    assert (
        app.main(
            [
                "--destination",
                "s3://bucket-x/t",
                "--date",
                "2024-01-01",
                "--option",
                "max_rows_per_file=lots",
            ]
        )
        == 2
    )
    assert "max_rows_per_file" in caplog.text
    with pytest.raises(SystemExit) as refused:
        app.main(["--destination", "s3://bucket-x/t", "--date", "2024-13-01"])
    assert refused.value.code == 2
    assert "not a date" in capsys.readouterr().err


def test_daily_app_plain_then_orchestrated_rerun_replaces_the_day(
    app: ModuleType,
    dest: str,
    committer: Committer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert app.main(["--destination", dest, "--date", "2024-01-01", "--rows", "500"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert json.loads(printed[-1])["rows"] == 500
    old = data_files(committer)
    assert old and all(f.startswith("dt=2024-01-01/") for f in old)
    table = arrow_table(committer, pa.schema([("dt", pa.date32())]))
    assert table.num_rows == 500 and sorted(table.column("id").to_pylist()) == list(range(500))
    assert set(table.column_names) == {"id", "region", "amount", "event_time", "dt"}

    # The Airflow DAG: setup, the application with --job-id, then commit.
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    # The input on S3, read from the store the endpoint option names.
    source = tmp_path / "input.parquet"
    pq.write_table(
        pa.table(
            {
                "id": list(range(1000, 1300)),
                "region": ["eu-west"] * 300,
                "dt": ["2024-01-01"] * 150 + ["2024-01-02"] * 150,
            }
        ),
        source,
    )
    input_key = f"inputs/{job.job_id}/input.parquet"
    committer.store.put_object(committer.dest.bucket, input_key, source.read_bytes())
    args = ["--destination", dest, "--date", "2024-01-01", "--job-id", job.job_id]
    args += [f"--input=s3://{committer.dest.bucket}/inputs/{job.job_id}/"]
    args += ["--option", f"endpoint={os.environ['AWS_ENDPOINT_URL']}"]
    with monkeypatch.context() as env:
        # The endpoint reaches the driver only as the option, as the DAG's stage
        # passes it: the environment's names a port nothing listens on.
        env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        env.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
        assert app.main(args) == 0
    second = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert second["state"] == "staged" and second["rows"] == 150
    assert data_files(committer) == old  # nothing visible before the orchestrator commits
    committer.commit_job(job.job_id)

    after = arrow_table(committer, pa.schema([("dt", pa.date32())]))
    assert sorted(after.column("id").to_pylist()) == list(range(1000, 1150))
    assert not set(old) & set(data_files(committer))
    assert pending_in_bucket(committer) == []


def test_daily_app_failure_exits_non_zero_and_leaves_nothing(
    app: ModuleType, dest: str, committer: Committer, caplog: pytest.LogCaptureFixture
) -> None:
    # A job id that was never set up: the writer refuses on the driver.
    with caplog.at_level(logging.INFO, logger="daily_partitioned_write"):
        code = app.main(
            [
                "--destination",
                dest,
                "--date",
                "2024-01-01",
                "--rows",
                "10",
                "--job-id",
                "0e0c6a52-41a9-4c8e-8f0e-55a3c1f1b6a1",
            ]
        )
    assert code == 1
    reason = (
        "failed: zero_rename.errors.JobNotFoundError: no job 0e0c6a52-41a9-4c8e-8f0e-55a3c1f1b6a1"
    )
    assert reason in caplog.text
    assert data_files(committer) == [] and pending_in_bucket(committer) == []
