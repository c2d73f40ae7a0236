"""Request statistics: count, bytes and time per S3 operation.

Kept per task attempt (saved in its manifest) and per job (saved in
``_SUCCESS``), in the shape of Hadoop's IOStatistics snapshot so tools that
read S3A's ``_SUCCESS`` files can read these too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

# Not a request: the body of a GET, read (its bytes are counted there).
BODY_READ = "GetObject.read"


class RequestStats:
    """Thread-safe counters, one set per S3 operation name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._retries: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._nanos: dict[str, int] = {}
        self._max_nanos: dict[str, int] = {}

    def record(
        self, op: str, nanos: int, nbytes: int = 0, retries: int = 0, failed: bool = False
    ) -> None:
        with self._lock:
            self._count[op] = self._count.get(op, 0) + 1
            self._bytes[op] = self._bytes.get(op, 0) + nbytes
            self._nanos[op] = self._nanos.get(op, 0) + nanos
            self._max_nanos[op] = max(self._max_nanos.get(op, 0), nanos)
            if retries:
                self._retries[op] = self._retries.get(op, 0) + retries
            if failed:
                self._errors[op] = self._errors.get(op, 0) + 1

    @property
    def total_requests(self) -> int:
        """Requests sent, retries included. The reads of GET bodies are counted
        under an operation of their own (for their bytes and time) but are not
        requests: the GET that answered them is one already."""
        with self._lock:
            counted = sum(n for op, n in self._count.items() if op != BODY_READ)
            return counted + sum(self._retries.values())

    def requests(self, op: str) -> int:
        with self._lock:
            return self._count.get(op, 0)

    def snapshot(self) -> dict[str, Any]:
        """Hadoop IOStatisticsSnapshot JSON: counters, gauges, minimums, maximums,
        meanstatistics."""
        with self._lock:
            counters: dict[str, int] = {}
            for op, n in self._count.items():
                counters[f"s3.{op}"] = n
                counters[f"s3.{op}.bytes"] = self._bytes[op]
            counters.update({f"s3.{op}.failures": n for op, n in self._errors.items()})
            counters.update({f"s3.{op}.retries": n for op, n in self._retries.items()})
            return {
                "counters": dict(sorted(counters.items())),
                "gauges": {},
                "minimums": {},
                "maximums": {
                    f"s3.{op}.duration_ms": n // 1_000_000
                    for op, n in sorted(self._max_nanos.items())
                },
                "meanstatistics": {
                    f"s3.{op}.duration_ms": {
                        "samples": self._count[op],
                        "sum": self._nanos[op] // 1_000_000,
                    }
                    for op in sorted(self._count)
                },
            }

    def merge_snapshot(self, snap: Mapping[str, Any]) -> None:
        """Add a snapshot (for example a task manifest's) into these counters."""
        with self._lock:
            for name, value in snap.get("counters", {}).items():
                op, _, kind = name.removeprefix("s3.").partition(".")
                target = {
                    "": self._count,
                    "bytes": self._bytes,
                    "failures": self._errors,
                    "retries": self._retries,
                }.get(kind)
                if target is not None:
                    target[op] = target.get(op, 0) + int(value)
            for name, mean in snap.get("meanstatistics", {}).items():
                op = name.removeprefix("s3.").removesuffix(".duration_ms")
                self._nanos[op] = self._nanos.get(op, 0) + int(mean.get("sum", 0)) * 1_000_000
            for name, value in snap.get("maximums", {}).items():
                op = name.removeprefix("s3.").removesuffix(".duration_ms")
                self._max_nanos[op] = max(self._max_nanos.get(op, 0), int(value) * 1_000_000)


def combined(snapshots: Iterable[Mapping[str, Any]]) -> RequestStats:
    stats = RequestStats()
    for snap in snapshots:
        stats.merge_snapshot(snap)
    return stats


def total_requests(snapshot: Mapping[str, Any]) -> int:
    """Requests in a snapshot, retries included."""
    return sum(
        int(v)
        for k, v in snapshot.get("counters", {}).items()
        if k.count(".") == 1 or k.endswith(".retries")
    )
