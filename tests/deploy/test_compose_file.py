"""docker-compose.yml: valid against the Compose specification, and wired for the DAG.

No Docker engine is needed: the Compose binary's ``config`` validates and
resolves the file (anchors, env files, ${...}) without one. The wiring is
checked on the resolved file, and through Airflow itself: a subprocess
started with a compose service's environment parses the DAG and resolves its
connections as the scheduler would.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.deploy.support import (
    AIRFLOW_SERVICES,
    COMPOSE_FILE,
    DEPLOY,
    REPO,
    compose_config,
    probe_airflow,
    run_compose,
)

SERVICES = {"postgres", "s3", "s3-init", "spark-master", "spark-worker", *AIRFLOW_SERVICES}
ONE_SHOT = {"s3-init", "airflow-init"}


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return compose_config()


def services(config: dict[str, Any]) -> dict[str, Any]:
    return config["services"]


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return cmd.split() if isinstance(cmd, str) else list(cmd)


def option(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


# --- the specification --------------------------------------------------------


def test_the_compose_binary_accepts_the_file() -> None:
    result = run_compose("config", "-q")
    assert result.returncode == 0, result.stderr
    # Every ${...} has a default: nothing is left blank for want of a variable.
    assert "variable is not set" not in result.stderr, result.stderr


def _variant(tmp_path: Path, change: Any) -> Path:
    """The compose file copied into tmp_path (with the env files it reads), changed."""
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    change(data)
    shutil.copytree(
        DEPLOY, tmp_path / "deploy", ignore=shutil.ignore_patterns(".stack", "__pycache__")
    )
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _published_port_as_string(data: dict[str, Any]) -> None:
    data["services"]["s3"]["ports"] = "127.0.0.1:8333:8333"


def _unknown_service_key(data: dict[str, Any]) -> None:
    data["services"]["airflow-scheduler"]["comand"] = "scheduler"


def _healthcheck_retries_as_word(data: dict[str, Any]) -> None:
    data["services"]["spark-master"]["healthcheck"]["retries"] = "many"


def _depends_on_missing_service(data: dict[str, Any]) -> None:
    data["services"]["airflow-scheduler"]["depends_on"]["spark"] = {"condition": "service_healthy"}


def _missing_env_file(data: dict[str, Any]) -> None:
    data["services"]["s3"]["env_file"] = ["deploy/missing.env"]


@pytest.mark.parametrize(
    "change, message",
    [
        (_published_port_as_string, "ports must be a array"),
        (_unknown_service_key, "additional properties 'comand' not allowed"),
        (_healthcheck_retries_as_word, "retries"),
        (_depends_on_missing_service, "undefined service"),
        (_missing_env_file, "missing.env"),
    ],
)
def test_the_check_rejects_an_invalid_variant(tmp_path: Path, change: Any, message: str) -> None:
    result = run_compose("config", "-q", compose_file=_variant(tmp_path, change))
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert message in result.stderr


def test_an_unchanged_copy_still_passes(tmp_path: Path) -> None:
    """So that the variants above fail for their change, not for being copied."""
    result = run_compose("config", "-q", compose_file=_variant(tmp_path, lambda data: None))
    assert result.returncode == 0, result.stderr


# --- services, health, ports --------------------------------------------------


def test_the_stack_has_its_services(config: dict[str, Any]) -> None:
    assert set(services(config)) == SERVICES


def test_every_long_running_service_has_a_healthcheck(config: dict[str, Any]) -> None:
    for name, service in services(config).items():
        if name in ONE_SHOT:
            assert service.get("restart") == "no", name
            continue
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), name


def test_services_start_after_what_they_need(config: dict[str, Any]) -> None:
    svc = services(config)
    for name in AIRFLOW_SERVICES:
        assert svc[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name
    for name in set(AIRFLOW_SERVICES) - {"airflow-init"}:
        assert (
            svc[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
        ), name
    # The scheduler runs the tasks: S3 must have its bucket and Spark a worker.
    scheduler = svc["airflow-scheduler"]["depends_on"]
    assert scheduler["s3-init"]["condition"] == "service_completed_successfully"
    assert scheduler["spark-worker"]["condition"] == "service_healthy"
    assert scheduler["airflow-apiserver"]["condition"] == "service_healthy"
    assert svc["s3-init"]["depends_on"]["s3"]["condition"] == "service_healthy"
    assert svc["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_published_ports_are_bound_to_loopback(config: dict[str, Any]) -> None:
    published = {
        name: service["ports"] for name, service in services(config).items() if service.get("ports")
    }
    assert set(published) == {"s3", "spark-master", "spark-worker", "airflow-apiserver"}
    for name, ports in published.items():
        for port in ports:
            assert port["host_ip"] == "127.0.0.1", (name, port)
    # Neither PostgreSQL nor the Spark master's RPC port leave the compose network.
    assert not services(config)["postgres"].get("ports")


def test_host_ports_can_be_moved() -> None:
    moved = compose_config({"ZERO_RENAME_AIRFLOW_PORT": "18080", "ZERO_RENAME_S3_PORT": "18333"})
    assert moved["services"]["airflow-apiserver"]["ports"][0]["published"] == "18080"
    assert moved["services"]["s3"]["ports"][0]["published"] == "18333"


# --- images -------------------------------------------------------------------


def test_images_are_built_from_the_deploy_dockerfiles(config: dict[str, Any]) -> None:
    for name, service in services(config).items():
        if name == "postgres" or name == "s3":
            assert "build" not in service, name
            continue
        dockerfile = (
            "deploy/airflow.Dockerfile" if name.startswith("airflow") else "deploy/spark.Dockerfile"
        )
        assert service["build"]["dockerfile"] == dockerfile, name
        assert Path(service["build"]["context"]) == REPO, name


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            pins[name.lower()] = version
    return pins


def test_the_images_install_the_tested_pins() -> None:
    pins = _pins()
    # The provider's pyspark-client overwrites pyspark's Python sources: same release.
    assert pins["pyspark"] == pins["pyspark-client"] == "4.2.0"
    airflow = (DEPLOY / "airflow.Dockerfile").read_text()
    spark = (DEPLOY / "spark.Dockerfile").read_text()
    base = re.search(r"^FROM apache/airflow:(\S+)-python(\d+\.\d+)$", airflow, re.M)
    assert base, "the Airflow image must be the official one, with its Python version"
    assert base[1] == pins["apache-airflow"]
    # Driver and executors must run the same Python minor version.
    assert re.search(rf"^FROM python:{re.escape(base[2])}-slim", spark, re.M)
    for dockerfile, extras in ((airflow, "[airflow,spark]"), (spark, "[spark]")):
        assert "--constraint /opt/zero-rename/constraints.txt" in dockerfile
        assert f'"/opt/zero-rename{extras}"' in dockerfile
        assert "openjdk-17-jre-headless" in dockerfile
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in airflow


@pytest.mark.parametrize("name", ["airflow", "spark"])
def test_the_build_context_sends_what_the_dockerfile_copies(name: str) -> None:
    """The context is the whole repository; its ignore file lets through only the sources."""
    ignore = [
        line.strip()
        for line in (DEPLOY / f"{name}.Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "*", "everything is left out unless let through"
    allowed = {line[1:] for line in ignore if line.startswith("!")}
    for line in (DEPLOY / f"{name}.Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            sources = [part for part in line.split()[1:-1] if not part.startswith("--")]
            for source in sources:
                assert source in allowed, (name, source)
                assert (REPO / source).exists(), source


# --- the environment ------------------------------------------------------------


def airflow_env(config: dict[str, Any]) -> dict[str, str]:
    return services(config)["airflow-scheduler"]["environment"]


def test_airflow_services_share_one_environment(config: dict[str, Any]) -> None:
    """One JWT secret and one Fernet key for all: a mismatched secret gets the
    task processes 403 from the Execution API."""
    envs = [services(config)[name]["environment"] for name in AIRFLOW_SERVICES]
    assert all(env == envs[0] for env in envs)
    env = envs[0]
    assert len(env["AIRFLOW__API_AUTH__JWT_SECRET"]) >= 64
    from cryptography.fernet import Fernet

    Fernet(env["AIRFLOW__CORE__FERNET_KEY"].encode())  # a valid key, or this raises


def test_task_processes_reach_the_api_server(config: dict[str, Any]) -> None:
    url = urlparse(airflow_env(config)["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert url.hostname == "airflow-apiserver" and url.path == "/execution/"
    api = services(config)["airflow-apiserver"]
    # The port the api-server listens on in its container, as its healthcheck knows.
    assert url.port == api["ports"][0]["target"]
    assert f"localhost:{url.port}/" in " ".join(api["healthcheck"]["test"])


def test_the_connections_point_at_the_services(config: dict[str, Any]) -> None:
    env = airflow_env(config)
    aws = json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"])
    endpoint = urlparse(aws["extra"]["endpoint_url"])
    s3_cmd = command(services(config)["s3"])
    assert (endpoint.hostname, endpoint.port) == ("s3", int(option_value(s3_cmd, "-s3.port")))
    # No credentials in the connection: boto3's chain finds the ones of s3.env.
    assert not {"login", "password"} & set(aws)
    assert env["AWS_ACCESS_KEY_ID"] and env["AWS_SECRET_ACCESS_KEY"]

    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    master = urlparse(spark["host"])
    master_cmd = command(services(config)["spark-master"])
    assert master.scheme == "spark"
    assert master.hostname == option(master_cmd, "--host") == "spark-master"
    assert master.port == int(option(master_cmd, "--port"))
    assert spark["host"] in command(services(config)["spark-worker"])
    assert spark["extra"]["deploy-mode"] == "client"


def option_value(cmd: list[str], flag: str) -> str:
    return next(word.split("=", 1)[1] for word in cmd if word.startswith(flag + "="))


def test_the_dag_writes_into_the_bucket_the_init_job_creates() -> None:
    for env in ({}, {"ZERO_RENAME_BUCKET": "lake"}):
        cfg = compose_config(env)
        bucket = cfg["services"]["s3-init"]["environment"]["ZERO_RENAME_BUCKET"]
        destination = airflow_env(cfg)["AIRFLOW__ZERO_RENAME__DAILY_DESTINATION"]
        assert destination == f"s3://{bucket}/daily_events"
        # The Commits page opens on it from the Browse menu.
        assert airflow_env(cfg)["AIRFLOW__ZERO_RENAME__DESTINATIONS"] == destination
        assert bucket == (env.get("ZERO_RENAME_BUCKET") or "warehouse")


def test_executors_get_the_s3_credentials(config: dict[str, Any]) -> None:
    svc = services(config)
    for name in ("s3", "s3-init", "spark-worker", "airflow-scheduler"):
        assert (
            svc[name]["environment"]["AWS_ACCESS_KEY_ID"]
            == svc["s3"]["environment"]["AWS_ACCESS_KEY_ID"]
        ), name
        assert (
            svc[name]["environment"]["AWS_SECRET_ACCESS_KEY"]
            == svc["s3"]["environment"]["AWS_SECRET_ACCESS_KEY"]
        ), name
    # The driver and the executors start the Python of their own image.
    assert airflow_env(config)["PYSPARK_PYTHON"] == "python3"


@pytest.mark.airflow
def test_airflow_reads_the_dag_wiring_from_the_compose_environment(
    config: dict[str, Any], tmp_path: Path
) -> None:
    """The scheduler's environment given to Airflow: the DAG parses, and its
    connections resolve to the compose services."""
    probe = probe_airflow(airflow_env(config), tmp_path / "home")
    assert probe["import_errors"] == {}
    assert probe["destination_conf"] == "s3://warehouse/daily_events"
    assert probe["stage"] == {
        "conn_id": "spark_default",
        "aws_conn_id": "aws_default",
        "destination": "s3://warehouse/daily_events",
        "application": "apps/daily_partitioned_write.py",
    }
    assert probe["commit"] == {
        "aws_conn_id": "aws_default",
        "destination": "s3://warehouse/daily_events",
    }
    assert probe["spark"] == {
        "master": "spark://spark-master:7077",
        "deploy_mode": "client",
        "binary": "spark-submit",
    }
    assert probe["aws"] == {
        "conn_type": "aws",
        "login": None,
        "password": None,
        "endpoint_url": "http://s3:8333",
        "region": "us-east-1",
    }
    assert probe["execution_api"] == "http://airflow-apiserver:8080/execution/"


# --- secrets ------------------------------------------------------------------

SECRET = re.compile(r"PASSWORD|SECRET|FERNET|ACCESS_KEY|TOKEN", re.I)
OVERRIDES = {
    "ZERO_RENAME_S3_ACCESS_KEY": "override-access",
    "ZERO_RENAME_S3_SECRET_KEY": "override-secret",
    "AIRFLOW__API_AUTH__JWT_SECRET": "override-jwt-" + "x" * 64,
    "AIRFLOW__CORE__FERNET_KEY": "b3ZlcnJpZGUtZmVybmV0LWtleS0zMi1ieXRlcy1sb25nIQ==",
    "POSTGRES_PASSWORD": "override-pg",
}


def _assignments() -> list[tuple[str, str, str]]:
    """(file, key, value) for every key=value and key: value of the compose and env files."""
    found = []
    for path in (COMPOSE_FILE, DEPLOY / "s3.env", DEPLOY / "airflow.env"):
        for line in path.read_text().splitlines():
            match = re.match(r"^\s*-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(.+)$", line)
            if match and not line.lstrip().startswith("#"):
                found.append((path.name, match[1], match[2].strip()))
    return found


def test_no_secret_is_written_down_without_an_override() -> None:
    """Every credential is ${VAR:-local-dev default}, so the environment replaces it."""
    secrets = [(f, k, v) for f, k, v in _assignments() if SECRET.search(k)]
    assert {k for _, k, _ in secrets} >= {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AIRFLOW__API_AUTH__JWT_SECRET",
        "AIRFLOW__CORE__FERNET_KEY",
        "POSTGRES_PASSWORD",
    }
    for file, key, value in secrets:
        assert re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-[^}]*\}", value), (file, key, value)
    # The database URL embeds the password the same way.
    text = COMPOSE_FILE.read_text()
    assert "${POSTGRES_PASSWORD:-airflow}@postgres" in text


def test_overridden_secrets_reach_every_service_and_no_default_is_left() -> None:
    default = json.dumps(compose_config())
    cfg = compose_config(OVERRIDES)
    svc = cfg["services"]
    for name in AIRFLOW_SERVICES:
        env = svc[name]["environment"]
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == OVERRIDES["AIRFLOW__API_AUTH__JWT_SECRET"]
        assert env["AIRFLOW__CORE__FERNET_KEY"] == OVERRIDES["AIRFLOW__CORE__FERNET_KEY"]
        assert ":override-pg@postgres/" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    for name in ("s3", "s3-init", "spark-worker", *AIRFLOW_SERVICES):
        assert svc[name]["environment"]["AWS_ACCESS_KEY_ID"] == "override-access", name
        assert svc[name]["environment"]["AWS_SECRET_ACCESS_KEY"] == "override-secret", name
    assert svc["postgres"]["environment"]["POSTGRES_PASSWORD"] == "override-pg"
    resolved = json.dumps(cfg)
    for secret in (
        "zero-rename-local-secret",
        "zero-rename-local-development-jwt",
        "emVyby1yZW5hbWUtbG9jYWwtZGV2LWZlcm5ldC1rZXk=",
    ):
        assert secret in default and secret not in resolved


def test_credentials_exported_for_something_else_stay_out() -> None:
    """AWS_* of a developer's shell do not flow into the local stack."""
    cfg = compose_config({"AWS_ACCESS_KEY_ID": "AKIA-REAL", "AWS_SECRET_ACCESS_KEY": "real"})
    assert "AKIA-REAL" not in json.dumps(cfg)
