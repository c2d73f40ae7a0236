"""deploy/stack.sh: the stack as plain processes, started, used and stopped for real.

SeaweedFS, a Spark standalone master and worker, then Airflow's api-server,
scheduler, dag-processor and triggerer, all on loopback in a temporary
directory. The DAG runs on the stack, scheduled by Airflow, its stage the real
daily application submitted to the standalone master. Everything is stopped at
the end, and the last test checks that nothing of it is left.

Several minutes on a busy two-core machine: JVMs, Python workers and Airflow's
task processes all start cold.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.deploy.support import DEPLOY, VENV_BIN
from tests.jvm import JAVA_OPTIONS
from tests.lineage_catalog import running_catalog

pytestmark = pytest.mark.extended

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1"}
DAG_ID = "daily_partitioned_write"
# The lineage catalog's key: it must reach the catalog, and no log or event.
LINEAGE_KEY = "stack-lineage-key-93d1"
# The run's end is seen within a second; a poll is one cheap API request.
POLL_SECONDS = 1.0


class Stack:
    """deploy/stack.sh run against one state directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: dict[int, psutil.Process] = {}
        self.seen_ports: set[int] = set()

    def run(
        self, *args: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # The caller's ZERO_RENAME_* would move the stack; the script filters the rest.
        caller = {k: v for k, v in os.environ.items() if not k.startswith("ZERO_RENAME_")}
        env = {**caller, **(env or {})}
        env["PYTHON"] = sys.executable
        # The suite's options for short-lived JVMs (tests/jvm.py), through the
        # variable every JVM reads: the stack hands it to its services.
        env["JAVA_TOOL_OPTIONS"] = JAVA_OPTIONS
        return subprocess.run(
            [str(DEPLOY / "stack.sh"), "--dir", str(self.root), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def up(self, *services: str, env: dict[str, str] | None = None) -> None:
        result = self.run("up", *services, "--timeout", "400", timeout=900, env=env)
        assert result.returncode == 0, f"{result.stderr}\n{self.logs()}"

    def status(self) -> dict[str, Any]:
        return json.loads(self.run("status", "--json").stdout)

    def env(self) -> dict[str, str]:
        result = self.run("env", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def pids(self) -> set[int]:
        """Every live process of the stack: the groups it records and their members."""
        leaders = {
            p["pid"]
            for s in self.status()["services"].values()
            for p in s.get("processes", {}).values()
            if p["alive"]
        }
        found = set()
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(proc.pid) in leaders:
                    found.add(proc.pid)
                    # The Process keeps its start time: a later process with the
                    # same id is not mistaken for this one.
                    self.seen.setdefault(proc.pid, proc)
            except (ProcessLookupError, PermissionError):
                continue
        return found

    def listeners(self) -> list[tuple[str, int, int]]:
        """(address, port, pid) of every TCP socket the stack listens on."""
        pids = self.pids()
        found = [
            (c.laddr.ip, c.laddr.port, c.pid)
            for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.pid in pids
        ]
        self.seen_ports |= {port for _, port, _ in found}
        return found

    def logs(self) -> str:
        out = []
        for log in sorted((self.root / "logs").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            out.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(out)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("stack"))
    try:
        stack.up("s3", "spark")
        yield stack
    finally:
        # Also after a failed test: nothing of the stack outlives the module.
        stack.run("down", timeout=180)


def get_json(url: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def zero_rename(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "zero-rename"), "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def shell_env(stack_env: dict[str, str]) -> dict[str, str]:
    return {
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/"),
        **stack_env,
    }


@pytest.mark.spark
@pytest.mark.s3
def test_up_starts_s3_and_spark_on_loopback(stack: Stack) -> None:
    services = stack.status()["services"]
    assert services["s3"]["state"] == "running" and services["s3"]["health"] == "healthy"
    spark = services["spark"]
    assert spark["state"] == "running"
    assert spark["health"]["status"] == "ALIVE" and spark["health"]["workers"] == 1
    assert services["airflow"] == {"state": "stopped"}
    listeners = stack.listeners()
    ports = {port for _, port, _ in listeners}
    for url in (services["s3"]["url"], spark["url"], spark["health"]["ui"]):
        assert int(url.rsplit(":", 1)[1].split("/")[0]) in ports, url
    assert {ip for ip, _, _ in listeners} <= LOOPBACK, listeners


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_airflow_runs_the_daily_dag_on_the_stack(stack: Stack) -> None:
    """Airflow from the same script: api-server healthy, then the DAG's first
    scheduled run (created when it is unpaused) submits the daily application to
    the standalone master (the writer's endpoint as an option, credentials from
    the environment) and commits. The one Spark submit of this module: the
    application's other runs are the daily DAG's and the Spark tests'. Its
    lineage goes to a catalog with a key (deploy/airflow.env's transport), which
    the stage hands Spark on its command line: the task's log, written by
    Airflow's supervisor, shows that line with the key masked."""
    with running_catalog() as catalog:
        transport = json.dumps(catalog.transport(LINEAGE_KEY))
        stack.up("airflow", env={"AIRFLOW__OPENLINEAGE__TRANSPORT": transport})
        run = run_the_day(stack)
        log = "".join(p.read_text(errors="replace") for p in task_logs(stack, run, "stage"))
    assert "Spark-Submit cmd:" in log and "spark.openlineage.transport.auth.apiKey=***" in log
    assert LINEAGE_KEY not in log
    # Every task's events reached the catalog with its key; none carries the key.
    tasks = {e["job"]["name"].rsplit(".", 1)[-1] for _, e in catalog.events}
    assert {"setup_job", "stage", "commit"} <= tasks, tasks
    assert {key for key, _ in catalog.events} == {f"Bearer {LINEAGE_KEY}"}
    assert not [b for b in catalog.bodies if LINEAGE_KEY.encode() in b]

    env = shell_env(stack.env())
    success = zero_rename(env, "success", "show", "s3://warehouse/daily_events")
    assert success.returncode == 0, success.stderr
    assert json.loads(success.stdout)["partitions"] == [f"dt={run['partition_key']}"]
    assert zero_rename(env, "validate", "s3://warehouse/daily_events").returncode == 0


def run_the_day(stack: Stack) -> dict[str, Any]:
    """Airflow healthy on loopback, the DAG unpaused: its first scheduled run, done
    on the cluster."""
    api = stack.status()["services"]["airflow"]["url"]
    health = get_json(f"{api}/api/v2/monitor/health")
    assert {k: v["status"] for k, v in health.items()} == {
        "metadatabase": "healthy",
        "scheduler": "healthy",
        "triggerer": "healthy",
        "dag_processor": "healthy",
    }
    listeners = stack.listeners()
    assert int(api.rsplit(":", 1)[1]) in {port for _, port, _ in listeners}
    assert {ip for ip, _, _ in listeners} <= LOOPBACK, listeners

    dag = get_json(f"{api}/api/v2/dags/{DAG_ID}", "PATCH", {"is_paused": False})
    assert dag["is_paused"] is False
    run = wait_for_run(api, timeout=900)
    tasks = {
        t["task_id"]: t["state"]
        for t in get_json(f"{api}/api/v2/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances")[
            "task_instances"
        ]
    }
    assert run["state"] == "success", (tasks, stage_log(stack, run))
    assert tasks == {
        "setup_job": "success",
        "stage": "success",
        "validate": "success",
        "resolve_conflicts": "success",
        "commit": "success",
        "abort_job": "skipped",
        "cleanup_job": "success",
    }

    # The stage ran on the cluster: the master lists the application, finished.
    ui = stack.status()["services"]["spark"]["health"]["ui"]
    apps = get_json(f"{ui}/json/")["completedapps"]
    assert "FINISHED" in [
        a["state"] for a in apps if a["name"].startswith("daily_partitioned_write")
    ], apps
    return run


def wait_for_run(api: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    runs: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            runs = get_json(f"{api}/api/v2/dags/{DAG_ID}/dagRuns")["dag_runs"]
        except OSError:
            # A busy api-server on a busy machine may miss one poll; the deadline counts.
            time.sleep(POLL_SECONDS)
            continue
        done = [r for r in runs if r["state"] in ("success", "failed")]
        if done:
            return done[0]
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"no run of {DAG_ID} finished in {timeout:.0f}s: {runs}")


def task_logs(stack: Stack, run: dict[str, Any], task: str = "*") -> list[Path]:
    """The log files Airflow's supervisor wrote for the run's tasks."""
    pattern = f"dag_id={DAG_ID}/run_id={run['dag_run_id']}/task_id={task}/attempt=*.log"
    return sorted((stack.root / "airflow" / "logs").glob(pattern))


def stage_log(stack: Stack, run: dict[str, Any]) -> str:
    logs = task_logs(stack, run)
    return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


@pytest.mark.spark
@pytest.mark.s3
def test_down_stops_every_process(stack: Stack) -> None:
    running = stack.pids()
    assert running
    ports = stack.seen_ports | {port for _, port, _ in stack.listeners()}
    result = stack.run("down", timeout=180)
    assert result.returncode == 0, result.stderr
    left = []
    for proc in stack.seen.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc.cmdline()[:3])
    assert not left
    for port in ports:
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, port
    assert stack.run("status").returncode == 3
