"""deploy/*.env: the plain-process stack reads them exactly as Compose does.

The env files are the one source of the stack's shared environment; this is
what makes the plain-process stack and the compose stack the same stack.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.deploy.support import DEPLOY, compose_config, stack_module

ENV_FILES = ("s3.env", "airflow.env")
INPUTS = [
    pytest.param({}, id="defaults"),
    pytest.param({"ZERO_RENAME_S3_ENDPOINT": "http://127.0.0.1:9000",
                  "ZERO_RENAME_SPARK_MASTER": "spark://127.0.0.1:7078",
                  "ZERO_RENAME_API_URL": "http://127.0.0.1:8088",
                  "ZERO_RENAME_SCHEDULER_HEALTH_PORT": "18974",
                  "ZERO_RENAME_PYSPARK_PYTHON": "/opt/venv/bin/python",
                  "ZERO_RENAME_BUCKET": "lake",
                  "ZERO_RENAME_S3_REGION": "eu-west-1",
                  "AIRFLOW__API_AUTH__JWT_SECRET": "j" * 64}, id="plain-stack-addresses"),
    # ':-' takes the default for an empty value too.
    pytest.param({"ZERO_RENAME_S3_ENDPOINT": "", "ZERO_RENAME_BUCKET": ""}, id="empty"),
]


def compose_reading(tmp_path: Path, name: str, inputs: dict[str, str]) -> dict[str, str]:
    """What Compose puts into a container's environment from this one env file."""
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(json.dumps({"services": {"probe": {
        "image": "busybox", "env_file": [str(DEPLOY / name)]}}}))
    return compose_config(inputs, compose_file=compose)["services"]["probe"]["environment"]


@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.parametrize("name", ENV_FILES)
def test_the_stack_reads_env_files_as_compose_does(tmp_path: Path, name: str,
                                                   inputs: dict[str, str]) -> None:
    ours = stack_module().read_env_file(DEPLOY / name, inputs)
    assert ours == compose_reading(tmp_path, name, inputs)


def test_the_addresses_of_the_plain_stack_reach_the_connections() -> None:
    env = stack_module().read_env_file(DEPLOY / "airflow.env", {
        "ZERO_RENAME_S3_ENDPOINT": "http://127.0.0.1:9000",
        "ZERO_RENAME_SPARK_MASTER": "spark://127.0.0.1:7078"})
    assert json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"])["extra"]["endpoint_url"] \
        == "http://127.0.0.1:9000"
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])["host"] == "spark://127.0.0.1:7078"


@pytest.mark.parametrize("line", [
    "KEY='single quoted'",          # Compose takes it literally, a shell would not expand it
    "KEY=$BARE",                    # only ${NAME} forms
    "KEY=two words",                # unquoted spaces
    "KEY=value # comment",          # inline comments read differently
    'KEY="unterminated',
    "not a key=value",
])
def test_syntax_outside_the_common_subset_is_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / "bad.env"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match="bad.env:1"):
        stack_module().read_env_file(path, {})
