"""deploy/stack.py: the plain-process services get what Compose gives the containers.

The env files are the one source of the stack's shared environment, and the
Compose binary reads them for both stacks: each plain-process service gets
its compose service's environment, resolved with the plain stack's own
addresses, and deploy/Procfile finds every variable it uses.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.support import COMPOSE_FILE, DEPLOY, compose_config, stack_module

PORTS = {
    "s3": {"s3.port": 9000, "master.port": 9333},
    "spark": {
        "STACK_SPARK_PORT": 7078,
        "STACK_SPARK_UI_PORT": 18081,
        "STACK_WORKER_UI_PORT": 18082,
    },
    "airflow": {"STACK_AIRFLOW_PORT": 8088, "STACK_SCHEDULER_HEALTH_PORT": 18974},
}
# What a caller's shell holds besides what the stack needs.
SHELL = {"PATH": "/usr/bin:/bin", "HOME": "/home/dev", "PYTHONPATH": "/somewhere/else"}


def stack(root: Path, caller: dict[str, str] | None = None) -> Any:
    """A Stack in ``root`` as if its services had been started on PORTS."""
    module = stack_module()
    built = module.Stack(root)
    built.caller = {**SHELL, **(caller or {})}
    built.state["ports"] = PORTS
    return built


@pytest.mark.parametrize(
    "caller",
    [
        pytest.param({}, id="defaults"),
        pytest.param(
            {
                "ZERO_RENAME_BUCKET": "lake",
                "ZERO_RENAME_S3_REGION": "eu-west-1",
                "ZERO_RENAME_S3_ACCESS_KEY": "dev-key",
                "AIRFLOW__API_AUTH__JWT_SECRET": "j" * 64,
            },
            id="overrides",
        ),
        # ':-' takes the default for an empty value too.
        pytest.param({"ZERO_RENAME_BUCKET": ""}, id="empty"),
    ],
)
@pytest.mark.parametrize("service", ["s3", "spark", "airflow"])
def test_each_service_gets_its_compose_services_environment(
    tmp_path: Path, service: str, caller: dict[str, str]
) -> None:
    plain = stack(tmp_path, caller)
    compose_service = stack_module().SERVICES[service].compose_service
    inputs = {**caller, **stack_module().variables(PORTS)}
    containers = compose_config(inputs)["services"][compose_service]["environment"]
    ours = plain.environment(service)
    # Only the database differs: SQLite instead of the compose stack's PostgreSQL.
    containers.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", None)
    assert {k: ours.get(k) for k in containers} == containers
    assert "PYTHONPATH" not in ours  # the caller's shell stays out, as from a container


def test_the_addresses_of_the_plain_stack_reach_the_connections(tmp_path: Path) -> None:
    env = stack(tmp_path).environment("airflow")
    assert (
        json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"])["extra"]["endpoint_url"]
        == "http://127.0.0.1:9000"
    )
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])["host"] == "spark://127.0.0.1:7078"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:8088/execution/"
    assert env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT"] == "18974"
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert (
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        == f"sqlite:///{tmp_path.resolve() / 'airflow' / 'airflow.db'}"
    )


def test_credentials_come_from_their_own_names_only(tmp_path: Path) -> None:
    """ZERO_RENAME_S3_* reach every service as AWS_*; AWS_* a shell exported for
    something else do not."""
    plain = stack(
        tmp_path,
        {
            "ZERO_RENAME_S3_ACCESS_KEY": "dev-key",
            "AWS_SECRET_ACCESS_KEY": "real-secret",
            "AWS_SESSION_TOKEN": "real-token",
        },
    )
    for service in ("s3", "spark", "airflow"):
        env = plain.environment(service)
        assert env["AWS_ACCESS_KEY_ID"] == "dev-key", service
        assert env["AWS_SECRET_ACCESS_KEY"] == "zero-rename-local-secret", service
        assert "AWS_SESSION_TOKEN" not in env, service
    assert plain.shell_environment()["AWS_ACCESS_KEY_ID"] == "dev-key"


def _procfile() -> dict[str, str]:
    from honcho.environ import parse_procfile

    return dict(parse_procfile((DEPLOY / "Procfile").read_text()).processes)


def test_the_procfile_runs_the_compose_services() -> None:
    """Each process is named after its compose service, and each belongs to one
    plain-stack service."""
    procfile = _procfile()
    grouped = [p for s in stack_module().SERVICES.values() for p in s.processes]
    assert sorted(grouped) == sorted(procfile)
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    assert set(procfile) <= set(compose)


@pytest.mark.parametrize("service", ["s3", "spark", "airflow"])
def test_every_variable_the_procfile_reads_is_set(tmp_path: Path, service: str) -> None:
    env = stack(tmp_path).environment(service)
    for name in stack_module().SERVICES[service].processes:
        command = _procfile()[name]
        for match in re.finditer(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(:-)?", command):
            assert match[2] or match[1] in env, (name, match[1])


def test_a_file_compose_refuses_is_named(tmp_path: Path) -> None:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    data["services"]["s3"]["env_file"] = ["deploy/missing.env"]
    shutil.copytree(DEPLOY, tmp_path / "deploy", ignore=shutil.ignore_patterns(".stack"))
    variant = tmp_path / "docker-compose.yml"
    variant.write_text(yaml.safe_dump(data))
    module = stack_module()
    with pytest.raises(module.StackError, match="missing.env"):
        module.compose_environments(SHELL, compose_file=variant)
