"""What the deployment tests share: Compose as the stack runs it, the stack, Airflow probes."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DEPLOY = REPO / "deploy"
STACK = DEPLOY / "stack.py"
VENV_BIN = Path(sys.executable).parent

AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)


def run_compose(
    *args: str, compose_file: Path = COMPOSE_FILE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Compose on a compose file, in a clean environment: only ``env`` feeds
    ${...}, and no .env file is read, so a developer's shell cannot change the result."""
    clean = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(
        [
            *stack_module().compose_command(),
            "--project-directory",
            str(compose_file.parent),
            "-f",
            str(compose_file),
            "--env-file",
            os.devnull,
            *args,
        ],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def compose_config(
    env: dict[str, str] | None = None, compose_file: Path = COMPOSE_FILE
) -> dict[str, Any]:
    """The file as Compose resolves it: anchors merged, env files read, ${...} filled."""
    result = run_compose("config", "--format", "json", compose_file=compose_file, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@functools.cache
def stack_module() -> ModuleType:
    """deploy/stack.py as a module: its environment, services and Compose command."""
    spec = importlib.util.spec_from_file_location("zero_rename_deploy_stack", STACK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first: its dataclasses look their module up while it loads.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def probe_airflow(env: dict[str, str], home: Path) -> dict[str, Any]:
    """What Airflow, started with ``env``, makes of the DAG and its connections."""
    home.mkdir(parents=True, exist_ok=True)
    full = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        **env,
        "AIRFLOW_HOME": str(home),
        # Parsing the DAG needs no database; a local file keeps it off PostgreSQL.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
    }
    result = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "probe_airflow.py"), str(REPO / "dags")],
        env=full,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
