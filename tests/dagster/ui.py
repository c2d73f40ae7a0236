"""A Dagster UI process for a test: started, waited for, asked over GraphQL, stopped."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from zero_rename.embedded_s3 import stop_process_group


@contextmanager
def serving(
    command: Sequence[str],
    port: int,
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    startup_seconds: float,
) -> Iterator[str]:
    """Run ``command`` (dagster-webserver, dg dev), serving on ``port``, until
    the block ends; yields its URL once it answers. Its output goes to ``log_path``,
    whose end a failure to start shows."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            list(command),
            env=dict(env),
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + startup_seconds
            while not answers(url):
                assert proc.poll() is None, log_path.read_text()[-3000:]
                if time.monotonic() > deadline:
                    pytest.fail(f"{command[0]} did not answer in {startup_seconds} s")
                time.sleep(0.5)
            yield url
        finally:
            stop_process_group(proc)


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/server_info", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def graphql(url: str, query: str, **variables: Any) -> Any:
    answer = httpx.post(f"{url}/graphql", json={"query": query, "variables": variables}, timeout=60)
    answer.raise_for_status()
    body = answer.json()
    assert "errors" not in body, body
    return body["data"]
