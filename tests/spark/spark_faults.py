"""The ``zero-rename`` format with failures injected where Spark would meet them.

``zero-rename-faults`` takes the real format's options plus:

- ``fault``: ``raise`` (the task attempt fails after its first batch),
  ``exit`` (its Python worker dies on the spot, ``os._exit``), ``slow``
  (it sleeps ``fault_seconds`` first), ``part_fault`` (its UploadParts fail, on
  the background upload threads of a magic task), ``commit_raise`` (the driver fails
  after every task succeeded, before the job commit) or ``complete_fault``
  (every CompleteMultipartUpload after the first fails, so the job commit
  breaks after its point of no return) or ``tamper_output`` (once the job is
  committed, one of its files is deleted, before the output check runs);
- ``fault_partitions``: the partitions whose attempts fail (default ``0``);
- ``fault_attempts``: which attempt numbers fail, or ``all`` (default ``0``).

``zero-rename-environment`` (:class:`EnvironmentProbe`) writes nothing: it
reports what its Python workers found in their environment.

Executors cannot import test modules, so the conftest ships this module's
code by value inside the pickles.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from botocore.exceptions import ClientError
from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from zero_rename.core.data.model import JobSummary, TaskManifest
from zero_rename.core.s3.completers import add_request_hook
from zero_rename.spark import WORKER_ENVIRONMENT, datasource
from zero_rename.spark.datasource import ZeroRenameDataSource, ZeroRenameWriter
from zero_rename.spark.options import WriteConfig, parse_writer_options

CRASH_EXIT_CODE = 86


class InjectedFault(RuntimeError):
    pass


class FaultyDataSource(ZeroRenameDataSource):
    @classmethod
    def name(cls) -> str:
        return "zero-rename-faults"

    def writer(self, schema: StructType, overwrite: bool) -> ZeroRenameWriter:
        options = dict(self.options)
        fault = {k: options.pop(k) for k in list(options) if k.startswith("fault")}
        return FaultyWriter(parse_writer_options(options, overwrite), schema, fault)


class FaultyWriter(ZeroRenameWriter):
    def __init__(self, config: WriteConfig, schema: StructType, fault: dict[str, str]) -> None:
        self.fault = fault.get("fault", "")
        self.partitions = {int(p) for p in fault.get("fault_partitions", "0").split(",")}
        self.attempts = fault.get("fault_attempts", "0")
        self.seconds = float(fault.get("fault_seconds", "3"))
        super().__init__(config, schema)

    def _hits(self) -> bool:
        context = TaskContext.get()
        assert context is not None
        return context.partitionId() in self.partitions and (
            self.attempts == "all"
            or context.attemptNumber() in {int(a) for a in self.attempts.split(",")}
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Any:
        if self.fault in ("raise", "exit", "slow") and self._hits():
            iterator = self._faulty(iterator)
        if self.fault == "part_fault" and self._hits():
            # The committer (and its client) outlives this attempt in a reused worker.
            client = self._committer().store.client
            _fail_after_first(client, "UploadPart", after=0)
            try:
                return super().write(iterator)
            finally:
                client.meta.events.unregister("before-call.s3.UploadPart", unique_id="spark-fault")
        return super().write(iterator)

    def _faulty(self, iterator: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.fault == "slow":
            time.sleep(self.seconds)
            yield from iterator
            return
        fired = False
        for batch in iterator:
            yield batch
            if not fired:  # after the first batch: files are open, uploads exist
                fired = True
                self._fire()
        if not fired:
            self._fire()

    def _fire(self) -> None:
        if self.fault == "exit":
            os._exit(CRASH_EXIT_CODE)
        raise InjectedFault("injected failure in a task attempt")

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        if self.fault == "commit_raise":
            raise InjectedFault("injected failure after every task succeeded, before job commit")
        if self.fault == "complete_fault":
            datasource.COMMIT_RETRY_SECONDS = 0.05
            _fail_after_first(self._committer().store.client, "CompleteMultipartUpload")
        super().commit(messages)

    def _commit_job(self, manifests: list[TaskManifest], expected: set[str]) -> JobSummary:
        summary = super()._commit_job(manifests, expected)
        if self.fault == "tamper_output":
            committer = self._committer()
            success = committer.read_success()
            assert success is not None
            first = next(iter(committer.committed_files(success)))
            committer.store.delete_objects(committer.dest.bucket, [committer.dest.dir + first.path])
        return summary


def _fail_after_first(client: Any, op: str, after: int = 1) -> None:
    calls = {"n": 0}

    def hook(**_: Any) -> None:
        calls["n"] += 1
        if calls["n"] > after:
            raise ClientError(
                {
                    "Error": {
                        "Code": "InternalError",
                        "Message": f"injected fault in {op} #{calls['n']}",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                op,
            )

    client.meta.events.register(f"before-call.s3.{op}", hook, unique_id="spark-fault")
    if op == "CompleteMultipartUpload":
        # Job commit's completes go out on the light path: the same fault there.
        add_request_hook(client, lambda stage, key, context: hook() if stage == "before" else None)


def _environment() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in WORKER_ENVIRONMENT}


class EnvironmentProbe(DataSource):
    """Saves, as JSON at ``.save(path)`` (a local file), the variables of
    ``WORKER_ENVIRONMENT`` as its job setup, tasks and job commit saw them."""

    @classmethod
    def name(cls) -> str:
        return "zero-rename-environment"

    def writer(self, schema: StructType, overwrite: bool) -> EnvironmentWriter:
        return EnvironmentWriter(self.options["path"], _environment())


class EnvironmentMessage(WriterCommitMessage):
    def __init__(self, environment: dict[str, str | None]) -> None:
        self.environment = environment


class EnvironmentWriter(DataSourceArrowWriter):
    def __init__(self, path: str, setup: dict[str, str | None]) -> None:
        self.path, self.setup = path, setup

    def write(self, iterator: Iterator[pa.RecordBatch]) -> EnvironmentMessage:
        for _ in iterator:
            pass
        return EnvironmentMessage(_environment())

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        tasks = [m.environment for m in messages if isinstance(m, EnvironmentMessage)]
        seen = {"setup": self.setup, "tasks": tasks, "commit": _environment()}
        with open(self.path, "w") as out:
            json.dump(seen, out)
