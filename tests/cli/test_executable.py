"""The installed ``zero-rename`` executable, in its own process."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cli.conftest import committed_job
from zero_rename.core.committer import Committer

pytestmark = pytest.mark.s3

EXECUTABLE = str(Path(sys.executable).parent / "zero-rename")


def zero_rename(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXECUTABLE, *argv], capture_output=True, text=True, timeout=timeout)


def test_commands_and_exit_codes_through_the_executable(committer: Committer, dest: str) -> None:
    """The endpoint and credentials come from the environment, as a user's shell has them."""
    assert os.environ.get("AWS_ENDPOINT_URL")
    job = committed_job(committer)
    listed = zero_rename("jobs", "list", dest, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["job_id"] for r in json.loads(listed.stdout)] == [job.job_id]

    success = committer.read_success()
    assert success is not None
    committer.store.client.delete_object(
        Bucket=committer.dest.bucket, Key=committer.dest.dir + success.files[0].path
    )
    broken = zero_rename("--json", "validate", dest)
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["problems"][0]["kind"] == "missing"

    refused = zero_rename("jobs", "abort", dest, job.job_id)
    assert refused.returncode == 3 and refused.stdout == ""
    assert refused.stderr.startswith("error: ") and "Traceback" not in refused.stderr


def test_a_destination_longer_than_any_key_is_refused_at_once() -> None:
    """As long as one argument may be (Linux takes 128 KiB): a usage error at once,
    one line, before any request (the endpoint here answers nothing)."""
    ran = subprocess.run(
        [EXECUTABLE, "jobs", "list", "s3://bkt/" + "a" * 120_000],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
    )
    assert ran.returncode == 2 and ran.stdout == ""
    assert len(ran.stderr.splitlines()) == 1 and "longer than any S3 URL" in ran.stderr


def _first_line(proc: subprocess.Popen[str], timeout: float = 90) -> dict[str, Any]:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "s3 serve printed nothing"
    return json.loads(proc.stdout.readline())


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url + "/", timeout=2)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def test_s3_serve_runs_until_signalled_then_stops_cleanly(tmp_path: Path) -> None:
    """SIGTERM, as an orchestrator stops it; Ctrl-C takes the same path (see test_units)."""
    data_dir = tmp_path / "s3"
    proc = subprocess.Popen(
        [
            EXECUTABLE,
            "s3",
            "serve",
            "--json",
            "--dir",
            str(data_dir),
            "--bucket",
            "first",
            "--bucket",
            "second",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        info = _first_line(proc)
        assert info["environment"]["AWS_ENDPOINT_URL"] == info["endpoint_url"]
        assert info["endpoint_url"].startswith("http://127.0.0.1:")
        env = info["environment"]
        client = boto3.client(
            "s3",
            endpoint_url=info["endpoint_url"],
            region_name="us-east-1",
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        assert {b["Name"] for b in client.list_buckets()["Buckets"]} >= {"first", "second"}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not _answers(info["endpoint_url"])
    with pytest.raises(ProcessLookupError):
        os.kill(info["pid"], 0)
    assert (data_dir / "weed.log").exists()  # --dir keeps the data
