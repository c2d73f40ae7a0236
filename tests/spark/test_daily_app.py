"""The daily application the Airflow DAG submits, run as ``spark-submit --master local[2]``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import pending_in_bucket
from zero_rename.core.committer import Committer

from spark_support import arrow_table, data_files

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dags" / "apps" / "daily_partitioned_write.py"


def submit(*args: str, timeout: float = 300,
           endpoint_env: bool = True) -> subprocess.CompletedProcess[str]:
    """spark-submit the application; without ``endpoint_env`` the S3 endpoint reaches
    it only through ``--option endpoint=``, as the Airflow stage passes it."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if not endpoint_env:
        env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    command = [os.path.join(bin_dir, "spark-submit"), "--master", "local[2]",
               "--conf", "spark.ui.enabled=false", str(APP), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def summary_of(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    # spark-submit merges the driver's stderr (the logs) into its stdout.
    [line] = [line for line in result.stdout.splitlines() if line.startswith('{"')]
    return json.loads(line)


def test_bad_arguments_exit_2_before_spark_starts(s3_server: object) -> None:
    result = subprocess.run(
        [sys.executable, str(APP), "--destination", "s3://bucket-x/t", "--date", "2024-01-01",
         "--option", "max_rows_per_file=lots"], capture_output=True, text=True, timeout=60,
        check=False)
    assert result.returncode == 2
    assert "max_rows_per_file" in result.stderr
    result = subprocess.run([sys.executable, str(APP), "--destination", "s3://bucket-x/t",
                             "--date", "2024-13-01"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2 and "not a date" in result.stderr


def test_daily_app_plain_then_orchestrated_rerun_replaces_the_day(
        dest: str, committer: Committer, tmp_path: Path) -> None:
    first = submit("--destination", dest, "--date", "2024-01-01", "--rows", "500")
    assert first.returncode == 0, first.stdout[-3000:]
    assert summary_of(first)["rows"] == 500
    old = data_files(committer)
    assert old and all(f.startswith("dt=2024-01-01/") for f in old)
    table = arrow_table(committer, pa.schema([("dt", pa.date32())]))
    assert table.num_rows == 500 and sorted(table.column("id").to_pylist()) == list(range(500))
    assert set(table.column_names) == {"id", "region", "amount", "event_time", "dt"}

    # The Airflow DAG: setup, the application with --job-id, then commit.
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "replace"})
    # The input on S3, read from the store the endpoint option names.
    source = tmp_path / "input.parquet"
    pq.write_table(pa.table({"id": list(range(1000, 1300)), "region": ["eu-west"] * 300,
                             "dt": ["2024-01-01"] * 150 + ["2024-01-02"] * 150}), source)
    input_key = f"inputs/{job.job_id}/input.parquet"
    committer.store.put_object(committer.dest.bucket, input_key, source.read_bytes())
    second = submit("--destination", dest, "--date", "2024-01-01", "--job-id", job.job_id,
                    f"--input=s3://{committer.dest.bucket}/inputs/{job.job_id}/",
                    "--option", f"endpoint={os.environ['AWS_ENDPOINT_URL']}",
                    endpoint_env=False)
    assert second.returncode == 0, second.stdout[-3000:]
    assert summary_of(second)["state"] == "staged" and summary_of(second)["rows"] == 150
    assert data_files(committer) == old  # nothing visible before the orchestrator commits
    committer.commit_job(job.job_id)

    after = arrow_table(committer, pa.schema([("dt", pa.date32())]))
    assert sorted(after.column("id").to_pylist()) == list(range(1000, 1150))
    assert not set(old) & set(data_files(committer))
    assert pending_in_bucket(committer) == []


def test_daily_app_failure_exits_non_zero_and_leaves_nothing(dest: str,
                                                             committer: Committer) -> None:
    # A job id that was never set up: the writer refuses on the driver.
    result = submit("--destination", dest, "--date", "2024-01-01", "--rows", "10",
                    "--job-id", "0e0c6a52-41a9-4c8e-8f0e-55a3c1f1b6a1")
    assert result.returncode == 1
    reason = ("failed: zero_rename.errors.JobNotFoundError: "
              "no job 0e0c6a52-41a9-4c8e-8f0e-55a3c1f1b6a1")
    assert reason in result.stdout
    assert data_files(committer) == [] and pending_in_bucket(committer) == []
