"""The format through a Spark Connect client: the write, its commit and abort
and the read run on the server's side, the client only sends the plan.

The server is Spark's own Connect service, started in the suite's Spark
application (its JVM already warm: a Connect session's local server of its own
would start another, 15 s more); the client a process of its own.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import pending_in_bucket
from zero_rename.core.committer import Committer
from zero_rename.core.views.snapshot import table_snapshot
from zero_rename.embedded_s3 import free_ports

from spark_support import data_files

# Under make test-extended: the Connect service's start and its client's
# process (pyspark's Connect client, gRPC and pandas) take about 50 s of the Spark
# group, the longest chain of make test's workers.
pytestmark = [pytest.mark.spark, pytest.mark.extended]

SCRIPT = Path(__file__).with_name("connect_write.py")


@pytest.fixture(scope="module")
def connect_server(spark: Any) -> Iterator[str]:
    """Spark Connect's service on a free loopback port, for this module's tests;
    Spark stops it with the application."""
    [port] = free_ports(1)
    context = spark.sparkContext._jsc.sc()
    context.conf().set("spark.connect.grpc.binding.address", "127.0.0.1")
    context.conf().set("spark.connect.grpc.binding.port", str(port))
    # The server finds a client gone when a response stream of its ends (every
    # 2 minutes by default, where the client attaches again), then interrupts
    # the execution left after detachedTimeout (5 minutes), looked for this often
    # (30 s): seconds here.
    conf = context.conf()
    conf.set("spark.connect.execute.reattachable.senderMaxStreamDuration", "2s")
    conf.set("spark.connect.execute.manager.detachedTimeout", "2s")
    conf.set("spark.connect.execute.manager.maintenanceInterval", "1s")
    service = getattr(spark._jvm, "org.apache.spark.sql.connect.service.SparkConnectService")
    service.start(context)
    yield f"sc://127.0.0.1:{port}"


def test_a_connect_client_writes_and_reads_and_its_failed_write_leaves_nothing(
    connect_server: str, dest: str, committer: Committer
) -> None:
    ran = subprocess.run(
        [sys.executable, str(SCRIPT), connect_server, dest],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    seen = json.loads(ran.stdout.splitlines()[-1])
    # The first write's rows, once each: nothing of the failed one.
    assert seen["read"] == {"2024-01-01": 200, "2024-01-02": 200}
    assert "ZeroDivisionError" in seen["failed"]
    assert sorted(j.state for j in committer.jobs()) == ["aborted", "committed"]
    # Only the first job's files are visible, each once.
    assert data_files(committer) == sorted(f.relative for f in table_snapshot(committer.ctx).files)
    # The aborted job's uploads: the abort took them, unless the killed attempt of
    # the other task began one after it (see test_spark_failures); its cleanup then.
    [aborted] = [j for j in committer.jobs() if j.state == "aborted"]
    deadline = time.monotonic() + 60
    while pending_in_bucket(committer) and time.monotonic() < deadline:
        time.sleep(3)
        committer.cleanup_job(aborted.job_id)
    assert pending_in_bucket(committer) == []


def test_a_write_whose_connect_client_is_killed_is_aborted_and_leaves_nothing(
    connect_server: str, dest: str, committer: Committer, tmp_path: Path
) -> None:
    """The client dies (SIGKILL) while a task of its write runs: the server
    interrupts the execution it left, Spark aborts the job, and the destination
    has no file and no pending upload, the other task's uploads included."""
    marker = tmp_path / "hanging"
    client = subprocess.Popen(
        [sys.executable, str(SCRIPT), connect_server, dest, str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert client.poll() is None, client.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the write's task never started"
            time.sleep(0.2)
        [job] = committer.jobs()
        assert job.state == "setup"
    finally:
        client.send_signal(signal.SIGKILL)
        client.communicate()
    deadline = time.monotonic() + 120
    while committer.job(job.job_id).state != "aborted":
        assert time.monotonic() < deadline, committer.job(job.job_id).state
        time.sleep(0.5)
    assert data_files(committer) == []
    deadline = time.monotonic() + 60
    while pending_in_bucket(committer) and time.monotonic() < deadline:
        time.sleep(3)
        committer.cleanup_job(job.job_id)
    assert pending_in_bucket(committer) == []
