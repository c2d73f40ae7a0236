"""The benchmark's direct write through a Python data source: the unsafe direct
write (no commit protocol) from a data source's ``write()``, with a job setup
and a job commit that do nothing.

Spark runs every Python data source's ``writer()`` and ``commit()`` in Python
workers it starts on the driver, whatever they do. This format pays for those
workers and nothing else, so beside the direct write (``mapInArrow``) it
measures what any Python data source costs a write, and beside the
``zero-rename`` format what the format itself adds. Its driver-side workers
import this module and pyspark alone; the tasks import the benchmark's writer.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from bench.process import cpu_seconds, process_started

if TYPE_CHECKING:
    import pyarrow as pa

DIRECT_FORMAT = "direct-bench"


def _record(path: str, **fields: Any) -> None:
    """One metrics line, as :func:`bench.spark_source.record` writes them."""
    heavy = ("pyarrow", "pandas", "numpy", "pyiceberg", "deltalake", "polars")
    loaded = sorted({name.split(".")[0] for name in sys.modules} & set(heavy))
    line = {"pid": os.getpid(), "requests": {}, "cpu": cpu_seconds(), "heavy": loaded, **fields}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


class DirectSource(DataSource):
    """``df.write.format("direct-bench")`` with the benchmark's options (strings):
    ``endpoint``, ``bucket``, ``prefix``, ``part_size``, ``threads``,
    ``max_rows_per_file`` (empty: no limit), ``bench_metrics``, ``bench_method``,
    ``bench_round``."""

    @classmethod
    def name(cls) -> str:
        return DIRECT_FORMAT

    def writer(self, schema: Any, overwrite: bool) -> DirectWriter:
        started, cpu = time.time(), cpu_seconds()
        writer = DirectWriter(dict(self.options))
        writer.report("setup", started, cpu)
        return writer


class DirectWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def report(self, phase: str, started: float, cpu_at_start: float) -> None:
        _record(
            self.options["bench_metrics"],
            method=self.options["bench_method"],
            round=int(self.options["bench_round"]),
            phase=phase,
            t_proc=process_started(),
            t_start=started,
            t_end=time.time(),
            cpu_at_start=cpu_at_start,
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from bench.spark_bench import BenchConfig, PlainTask

        o = self.options
        cfg = BenchConfig(
            o["endpoint"],
            o["bucket"],
            o["bench_metrics"],
            part_size=int(o["part_size"]),
            threads=int(o["threads"]),
            max_rows_per_file=int(o["max_rows_per_file"]) if o["max_rows_per_file"] else None,
        )
        for _ in PlainTask(cfg, o["bench_method"], o["prefix"], int(o["bench_round"]))(iterator):
            pass
        return WriterCommitMessage()

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self.report("commit", time.time(), cpu_seconds())

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        pass
