"""The JVM engine of tests/peers, from the suite's side: ``tests/peers/peer.py`` run
by ``.venv-peers``'s interpreter (Spark 4.1.2, Iceberg 1.12.0, Delta 4.4.0), one
process for the whole session, spoken to a JSON line at a time."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
# The first start downloads about 830 MB of jars from Maven Central into the cache.
START_TIMEOUT = 1800.0
ANSWER_TIMEOUT = 300.0


class EngineError(Exception):
    """The engine refused a request; the message is its one line."""


class JvmEngine:
    """Spark with Iceberg and Delta, in a process of its own."""

    def __init__(self, environment: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [str(PEERS_PYTHON), "-m", "tests.peers.peer"],
            cwd=ROOT,
            env={**os.environ, **environment, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The JVM's log, the last lines of it for an error message.
        self.log: deque[str] = deque(maxlen=40)
        threading.Thread(target=self._drain, daemon=True).start()
        # Its start (about 12 s) overlaps whatever the caller does next; the first
        # request waits for it.
        self.started_in: float | None = None

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line.rstrip())

    def _answer(self, timeout: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            tail = "\n".join(self.log)
            raise RuntimeError(
                f"the JVM engine did not answer (exit {self.process.poll()}):\n{tail}"
            )
        answer: dict[str, Any] = json.loads(box[0])
        return answer

    def request(self, **request: Any) -> dict[str, Any]:
        if self.started_in is None:
            self.started_in = float(self._answer(START_TIMEOUT)["ready"])
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._answer(ANSWER_TIMEOUT)
        if "error" in answer:
            raise EngineError(answer["error"])
        return answer

    def sql(self, query: str) -> pa.Table:
        """The rows of ``query``, as Arrow (timestamps in UTC)."""
        return _arrow(self.request(op="sql", sql=query)["arrow"])

    def append(self, table_format: str, bucket: str, name: str, rows: pa.Table) -> None:
        """``rows`` appended by Spark's own writer of ``table_format``: to the Iceberg
        table ``zero_rename.peers.<name>``, or the Delta table ``s3a://<bucket>/<name>``."""
        self.request(
            op="append", format=table_format, bucket=bucket, name=name, arrow=_encode(rows)
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"op": "stop"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def _arrow(text: str) -> pa.Table:
    return pa.ipc.open_stream(base64.b64decode(text)).read_all()


def _encode(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()
