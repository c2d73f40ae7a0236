"""What the PySpark write benchmark runs inside Spark's Python workers, and how
it counts: S3 requests and call times through botocore's event hooks, task
timings, and the ``zero-rename-bench`` format (the zero-rename writer,
reporting). Kept apart from :mod:`bench.spark_bench`, so the driver's job setup
and commit workers, which unpickle the writer, load no more than the
``zero-rename`` format itself would.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from bench.process import cpu_seconds, peak_rss, process_started

try:
    from zero_rename.spark import worker_imports
except ImportError:  # a --before tree from before it: its models built as it builds them
    from contextlib import nullcontext as worker_imports  # type: ignore[assignment]

if TYPE_CHECKING:
    import pyarrow as pa

# As the format's own modules import the committer (its models built without
# pydantic's plugin lookup): this module is what the benchmark's workers unpickle.
with worker_imports():
    from zero_rename.core.s3.completers import OPERATION as LIGHT_OP
    from zero_rename.core.s3.completers import add_request_hook
    from zero_rename.spark.datasource import (
        ZeroRenameCommitMessage,
        ZeroRenameDataSource,
        ZeroRenameWriter,
    )
    from zero_rename.spark.options import WriteConfig, parse_writer_options

BENCH_FORMAT = "zero-rename-bench"
# The same format, registered with another tree's package first on the Python
# workers' path (spark_bench --before): the code before a change, in the same run.
BEFORE_FORMAT = "zero-rename-bench-before"
# Packages the driver-side workers (job setup, job commit) should not need.
HEAVY = ("pyarrow", "pandas", "numpy", "pyiceberg", "deltalake", "polars")


def heavy_loaded() -> list[str]:
    """The packages of :data:`HEAVY` this process has imported."""
    return sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))


def package_dir() -> str:
    """Where this process imported zero_rename from (a --before run checks it)."""
    import zero_rename

    return os.path.dirname(os.path.abspath(zero_rename.__file__))


# -- counting requests, in every Python process ------------------------------

_REQUESTS: Counter[str] = Counter()
# Seconds spent inside S3 API calls, per operation (from the call's start to
# its parsed answer, retries included), summed over every thread of the process.
_CALL_SECONDS: Counter[str] = Counter()
_HOOKED: set[int] = set()
_STARTED = "zr_bench_started"


def _count(event_name: str, **_: Any) -> None:
    # A before-send handler that returns a value replaces the response: return None.
    _REQUESTS[event_name.rsplit(".", 1)[-1]] += 1


def _call_started(context: dict[str, Any], **_: Any) -> None:
    # botocore hands the same per-call context to before-call and after-call.
    context[_STARTED] = time.perf_counter()


def _call_finished(event_name: str, context: dict[str, Any], **_: Any) -> None:
    started = context.pop(_STARTED, None)
    if started is not None:
        # Calls from other threads (pools, background uploads) overlap the task's own work.
        where = "" if threading.current_thread() is threading.main_thread() else "bg:"
        _CALL_SECONDS[where + event_name.rsplit(".", 1)[-1]] += time.perf_counter() - started


def _light_sent(stage: str, _key: str, _context: dict[str, Any]) -> None:
    if stage == "send":
        _REQUESTS[LIGHT_OP] += 1


def count_requests(client: Any) -> Any:
    """Count every request this boto3 client sends into this process's counter,
    and time every call."""
    if id(client) not in _HOOKED:
        events = client.meta.events
        events.register("before-send.s3", _count)
        events.register("before-call.s3", _call_started)
        events.register("after-call.s3", _call_finished)
        events.register("after-call-error.s3", _call_finished)
        # Job commit's completes go out on the light path, past botocore's events.
        add_request_hook(client, _light_sent)
        _HOOKED.add(id(client))
    return client


def snapshot() -> Counter[str]:
    """This process's requests so far (tasks call this, never the global itself:
    a closure would carry a copy of it to the executor)."""
    return Counter(_REQUESTS)


def requests_since(before: Counter[str]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in _REQUESTS.items() if n - before.get(op, 0)}


def call_seconds() -> Counter[str]:
    return Counter(_CALL_SECONDS)


def call_seconds_since(before: Counter[str]) -> dict[str, float]:
    return {
        op: round(t - before.get(op, 0.0), 4)
        for op, t in _CALL_SECONDS.items()
        if t - before.get(op, 0.0) > 0
    }


class TimedBatches:
    """Wraps a task's input: how long the task waited on Spark for its batches
    (the JVM's Arrow stream, deserialization included)."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self.batches = iter(batches)
        self.waited = 0.0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            started = time.perf_counter()
            try:
                batch = next(self.batches)
            except StopIteration:
                self.waited += time.perf_counter() - started
                return
            self.waited += time.perf_counter() - started
            yield batch


def record(path: str, **fields: Any) -> None:
    """Append one JSON line; lines this short are written atomically with O_APPEND."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")


class TaskTiming:
    """One Spark task's metrics line, measured from this object's creation: its
    S3 requests and their time, its wall time, CPU and peak memory."""

    def __init__(self) -> None:
        self.before, self.calls = snapshot(), call_seconds()
        self.started, self.wall = time.monotonic(), time.time()

    def record(
        self,
        path: str,
        method: str,
        round_number: int,
        rows: int,
        files: int,
        size: int,
        fed: float,
    ) -> None:
        record(
            path,
            method=method,
            round=round_number,
            phase="task",
            rows=rows,
            files=files,
            bytes=size,
            peak_rss=peak_rss(),
            cpu=cpu_seconds(),
            seconds=time.monotonic() - self.started,
            requests=requests_since(self.before),
            s3_seconds=call_seconds_since(self.calls),
            fed_seconds=fed,
            t_proc=process_started(),
            t_start=self.wall,
            t_end=time.time(),
            package=package_dir(),
        )


# -- zero-rename, counted -----------------------------------------------------


class BenchWriter(ZeroRenameWriter):
    """The zero-rename writer, reporting its requests, timings and task memory."""

    def __init__(
        self,
        config: WriteConfig,
        schema: Any,
        metrics: str,
        method: str,
        round_number: int,
        started: float | None = None,
        heavy_at_start: Sequence[str] = (),
        cpu_at_start: float | None = None,
    ) -> None:
        """``started``: when Spark called the format's ``writer()`` (default: now);
        ``heavy_at_start`` and ``cpu_at_start``: the packages the worker had loaded
        and the CPU it had used by then."""
        self.metrics, self.method, self.round = metrics, method, round_number
        before, started = snapshot(), started or time.time()
        super().__init__(config, schema)
        # cpu: the worker's whole life (a fresh one per write: imports included).
        record(
            metrics,
            method=method,
            round=round_number,
            phase="setup",
            requests=requests_since(before),
            cpu=cpu_seconds(),
            t_proc=process_started(),
            t_start=started,
            t_end=time.time(),
            heavy_at_start=list(heavy_at_start),
            heavy=heavy_loaded(),
            package=package_dir(),
            cpu_at_start=cpu_seconds() if cpu_at_start is None else cpu_at_start,
        )

    def _committer(self, **kwargs: Any) -> Any:
        committer = super()._committer(**kwargs)
        count_requests(committer.store.client)
        return committer

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ZeroRenameCommitMessage:
        timing = TaskTiming()
        batches = TimedBatches(iterator)
        message = super().write(iter(batches))
        timing.record(
            self.metrics,
            self.method,
            self.round,
            message.rows,
            message.files,
            message.bytes,
            batches.waited,
        )
        return message

    def commit(self, messages: Sequence[Any]) -> None:
        before, calls, started = snapshot(), call_seconds(), time.time()
        # What unpickling the writer and the messages loaded, and the CPU it took.
        heavy_at_start, cpu_at_start = heavy_loaded(), cpu_seconds()
        super().commit(messages)
        record(
            self.metrics,
            method=self.method,
            round=self.round,
            phase="commit",
            requests=requests_since(before),
            s3_seconds=call_seconds_since(calls),
            cpu=cpu_seconds(),
            t_proc=process_started(),
            t_start=started,
            t_end=time.time(),
            heavy_at_start=heavy_at_start,
            heavy=heavy_loaded(),
            package=package_dir(),
            cpu_at_start=cpu_at_start,
        )


class BenchSource(ZeroRenameDataSource):
    """``zero-rename`` with three more options: where to report, the method's name
    and the round."""

    @classmethod
    def name(cls) -> str:
        return BENCH_FORMAT

    def writer(self, schema: Any, overwrite: bool) -> BenchWriter:
        started, heavy_at_start, cpu_at_start = time.time(), heavy_loaded(), cpu_seconds()
        options = dict(self.options)
        metrics, method = options.pop("bench_metrics"), options.pop("bench_method")
        round_number = int(options.pop("bench_round"))
        return BenchWriter(
            parse_writer_options(options, overwrite),
            schema,
            metrics,
            method,
            round_number,
            started,
            heavy_at_start,
            cpu_at_start,
        )


class BeforeSource(BenchSource):
    """:class:`BenchSource` under another name, for the code before a change."""

    @classmethod
    def name(cls) -> str:
        return BEFORE_FORMAT
