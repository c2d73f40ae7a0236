"""Starting a driver (:mod:`bench.peers.driver`) and talking to it.

``drive(spec, on_ready, on_written)`` runs one write in a process of its own
under the peers' interpreter, calls ``on_ready`` right before the timed write
and ``on_written`` right after it (the caller's counters, fault rules...), and
returns the driver's last event: ``result``, ``unsupported`` or ``failed``.
``resolved_jars(method)`` resolves a method's packages once, untimed, so that
later sessions start from the list of jars instead of resolving them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from bench.peers import jars
from bench.peers.driver import ROOT, Spec
from bench.peers.sessions import METHODS

# The peers' interpreter: .venv-peers beside the sources, unless this one is it.
PEERS_PYTHON_VARIABLE = "ZERO_RENAME_PEERS_PYTHON"


def peers_python() -> str:
    configured = os.environ.get(PEERS_PYTHON_VARIABLE)
    if configured:
        return configured
    beside = Path(ROOT) / ".venv-peers" / "bin" / "python"
    return str(beside) if beside.exists() else sys.executable


class DriverFailed(Exception):
    """The driver process died, hung or broke the protocol; the message says how."""


class Driver:
    """One driver process: JSON lines out of its stdout, words into its stdin."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self.stderr = log.open("ab")
        self.proc = subprocess.Popen(
            [peers_python(), "-m", "bench.peers.driver", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,  # its JVM and Python workers go with it on a kill
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[str] = self.proc.stdin
        self.stdout: IO[str] = self.proc.stdout

    def send(self, line: str) -> None:
        self.stdin.write(line + "\n")
        self.stdin.flush()

    def event(self, deadline: float) -> dict[str, Any]:
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ)
            if not selector.select(max(0.0, deadline - time.monotonic())):
                raise DriverFailed(f"no answer before the deadline; see {self.log}")
        line = self.stdout.readline()
        if not line:
            self.proc.wait(30)
            raise DriverFailed(f"the driver exited ({self.proc.returncode}); see {self.log}")
        event: dict[str, Any] = json.loads(line)
        return event

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.stderr.close()


def drive(
    spec: Spec,
    log: Path,
    on_ready: Callable[[dict[str, Any]], None] = lambda _: None,
    on_written: Callable[[dict[str, Any]], None] = lambda _: None,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Run one write; the driver's last event (``result``, ``unsupported`` or
    ``failed``). Raises :class:`DriverFailed` if the driver dies or hangs."""
    deadline = time.monotonic() + timeout
    driver = Driver([], log)
    try:
        driver.send(json.dumps(asdict(spec)))
        while True:
            event = driver.event(deadline)
            if event["event"] == "ready":
                on_ready(event)
                driver.send("go")
            elif event["event"] == "written":
                on_written(event)
                driver.send("ok")
            else:
                return event
    except BaseException:
        if driver.proc.poll() is None:
            os.killpg(driver.proc.pid, signal.SIGKILL)
        raise
    finally:
        driver.close()


def resolved_jars(method: str, log: Path, timeout: float = 1800.0) -> str | None:
    """The jars of ``method``'s packages (comma-separated, as ``spark.jars``
    takes them), resolved by Ivy once and kept in the jar cache beside what it
    resolved; None for a method without packages."""
    packages = METHODS[method].packages
    if not packages:
        return None
    digest = hashlib.sha256(json.dumps([packages, jars.HADOOP_CLOUD_EXCLUDES]).encode()).hexdigest()
    saved = jars.cache_dir() / f"resolved-{digest[:16]}.txt"
    if saved.exists():
        found = saved.read_text().strip()
        if found and all(Path(u.removeprefix("file://")).exists() for u in found.split(",")):
            return found
    driver = Driver(["--resolve", method], log)
    try:
        event = driver.event(time.monotonic() + timeout)
    finally:
        driver.close()
    if event.get("event") != "resolved" or not event.get("jars"):
        raise DriverFailed(f"resolving {method}'s jars failed: {event.get('error', event)}")
    saved.write_text(event["jars"])
    return str(event["jars"])
