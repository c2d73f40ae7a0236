"""Output files of a task attempt, in the two committer modes.

``magic`` streams parts into a multipart upload at the final key while the
task writes: memory is one part per open file and nothing touches local disk.
``staging`` spools to local disk and uploads at task commit. Either way the
upload is left pending: nothing is visible until job commit completes it.

With :class:`BackgroundUploads` (an engine's task writer turns it on) the
requests leave the writing thread: a magic file creates its upload with its
first part, on a few threads, while the task encodes the next file (a file
smaller than a part costs the task no wait at all); a staging file is uploaded
as soon as it is closed rather than all at task commit. Task commit waits for
every one of them before it builds the manifest, and task abort stops them
before it aborts the uploads, so neither sees an upload still being created.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from zero_rename.core.data.model import FileStats, Part, PendingUpload
from zero_rename.core.data.options import MAX_PARTS
from zero_rename.core.s3.client import S3Store
from zero_rename.errors import StoreError, ZeroRenameError

# Called with (error, key, upload id) when a part upload failed: raises the
# error that explains it if the upload was aborted underneath the attempt (a
# job abort or commit swept it), or returns to let the error stand.
OnPartFailure = Callable[[StoreError, str, str], None]


def _ignore(_: StoreError, __: str, ___: str) -> None:
    return None


log = logging.getLogger(__name__)


class BackgroundUploads:
    """The S3 requests of one task attempt's files, run on a few threads.

    Memory stays bounded: part bodies queued or in flight add up to at most
    ``max_bytes`` (one part is always let through, whatever its size), and a
    writer that would pass it waits. The first failure is kept: the next
    :meth:`submit` raises it, so a failing task stops writing early, and
    :meth:`wait` raises it at task commit.
    """

    def __init__(self, threads: int, max_bytes: int) -> None:
        if threads < 1:
            raise ValueError(f"background uploads need at least one thread, got {threads}")
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="zr-upload")
        self._cond = threading.Condition()
        self._bytes = 0
        self._max_bytes = max_bytes
        # Submitted and not finished. A count, not futures: a task may send
        # hundreds of thousands of parts.
        self._unfinished = 0
        self._error: BaseException | None = None
        self._stopped = False

    def submit(self, nbytes: int, work: Callable[[], None]) -> None:
        """Run ``work`` (which holds ``nbytes`` of body) on an upload thread."""
        with self._cond:
            while (
                self._bytes
                and self._bytes + nbytes > self._max_bytes
                and self._error is None
                and not self._stopped
            ):
                self._cond.wait()
            self._check()
            self._bytes += nbytes
            self._unfinished += 1
            self._pool.submit(self._run, nbytes, work)

    def _run(self, nbytes: int, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:
            with self._cond:
                if self._error is None:
                    self._error = exc
        finally:
            with self._cond:
                self._bytes -= nbytes
                self._unfinished -= 1
                self._cond.notify_all()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._stopped:
            raise ZeroRenameError("the task attempt's uploads were stopped; it is aborting")

    def wait(self) -> None:
        """Wait until every submitted request is done; raise the first failure
        as soon as it happens (the caller aborts, which stops the rest)."""
        with self._cond:
            while self._unfinished and self._error is None and not self._stopped:
                self._cond.wait()
            self._check()

    def stop(self) -> None:
        """Drop what has not started and wait for what has: once this returns, no
        request of this attempt is in flight, and none will start. Idempotent."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._pool.shutdown(wait=True, cancel_futures=True)


class OutputFile(io.RawIOBase):
    """A writable binary file whose bytes become one pending upload.

    Callers may set :attr:`rows` so the manifest and ``_SUCCESS`` report row counts,
    and :attr:`stats` (what the writer knows of the file's columns) so that a
    table format's commit describes the file without reading it.
    """

    def __init__(self, bucket: str, key: str, partition: dict[str, str | None]) -> None:
        super().__init__()
        self.bucket = bucket
        self.key = key
        self.partition = dict(partition)
        self.rows: int | None = None
        self.stats: FileStats | None = None
        self.bytes = 0

    def writable(self) -> bool:
        return True

    def __del__(self) -> None:
        # IOBase closes on garbage collection; closing here would send S3
        # requests from a collector, so an unclosed file is left to abort.
        pass

    def pending(self) -> PendingUpload:
        raise NotImplementedError

    def abort(self, store: S3Store) -> None:
        raise NotImplementedError


class MagicOutput(OutputFile):
    """Uploads each full part as it is written; the last part at close.

    Without ``uploads`` every request is made by the writing thread, the
    upload created at open. With it the upload is created by the first part's
    request, and parts go out on the upload threads; a file is complete once
    :meth:`BackgroundUploads.wait` returned.
    """

    def __init__(
        self,
        store: S3Store,
        bucket: str,
        key: str,
        partition: dict[str, str | None],
        part_size: int,
        on_part_failure: OnPartFailure = _ignore,
        uploads: BackgroundUploads | None = None,
    ) -> None:
        super().__init__(bucket, key, partition)
        self._store = store
        self._part_size = part_size
        self._on_part_failure = on_part_failure
        self._uploads = uploads
        self._buffer = bytearray()
        self._parts: list[Part] = []
        self._submitted = 0  # part numbers handed out so far
        self._lock = threading.Lock()
        self.upload_id: str | None = None
        if uploads is None:
            self.upload_id = store.create_upload(bucket, key)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed:
            raise ValueError(f"write to closed file {self.key}")
        self._buffer += data
        self.bytes += len(data)
        while len(self._buffer) >= self._part_size:
            chunk = bytes(self._buffer[: self._part_size])
            del self._buffer[: self._part_size]
            self._upload(chunk)
        return len(data)

    def _upload(self, chunk: bytes) -> None:
        number = self._submitted + 1
        if number > MAX_PARTS:
            raise ZeroRenameError(
                f"{self.key} needs more than {MAX_PARTS} parts (S3's limit); raise part_size "
                f"above {self._part_size} bytes or write smaller files"
            )
        self._submitted = number
        if self._uploads is None:
            self._send(number, chunk)
        else:
            self._uploads.submit(len(chunk), lambda: self._send(number, chunk))

    def _upload_id(self) -> str:
        # Parts of one file may run on several threads: the first creates the upload.
        with self._lock:
            if self.upload_id is None:
                self.upload_id = self._store.create_upload(self.bucket, self.key)
            return self.upload_id

    def _send(self, number: int, chunk: bytes) -> None:
        upload_id = self._upload_id()
        try:
            etag = self._store.upload_part(self.bucket, self.key, upload_id, number, chunk)
        except StoreError as exc:
            self._on_part_failure(exc, self.key, upload_id)
            raise
        with self._lock:
            self._parts.append(Part(number=number, etag=etag, size=len(chunk)))

    def close(self) -> None:
        if self.closed:
            return
        # A 0-byte file is one empty part: S3 exempts the last part from the minimum.
        if self._buffer or not self._submitted:
            self._upload(bytes(self._buffer))
            self._buffer = bytearray()
        super().close()

    def pending(self) -> PendingUpload:
        assert self.upload_id is not None and self.closed
        with self._lock:
            parts = tuple(sorted(self._parts, key=lambda p: p.number))
        if len(parts) != self._submitted:
            raise ZeroRenameError(
                f"{self.key}: {self._submitted - len(parts)} of "
                f"{self._submitted} part(s) were not uploaded"
            )
        return PendingUpload(
            key=self.key,
            upload_id=self.upload_id,
            parts=parts,
            bytes=self.bytes,
            rows=self.rows,
            partition=self.partition,
            stats=self.stats,
        )

    def abort(self, store: S3Store) -> None:
        """Abort the upload; with background uploads, call it once they are stopped."""
        if self.upload_id is not None:
            store.abort_upload(self.bucket, self.key, self.upload_id)
        if not self.closed:
            self._buffer = bytearray()
            super().close()


class StagingOutput(OutputFile):
    """Spools to a local file; :meth:`upload` sends it as parts at task commit."""

    def __init__(
        self,
        bucket: str,
        key: str,
        partition: dict[str, str | None],
        spool_path: str,
        part_size: int,
        on_part_failure: OnPartFailure = _ignore,
        uploads: tuple[BackgroundUploads, S3Store] | None = None,
    ) -> None:
        super().__init__(bucket, key, partition)
        self.spool_path = spool_path
        self._part_size = part_size
        self._on_part_failure = on_part_failure
        # With background uploads the file is uploaded once closed, not at task commit.
        self._uploads = uploads
        self.uploading = False
        self._file: BinaryIO = open(spool_path, "wb")  # noqa: SIM115
        self._parts: list[Part] = []
        self.upload_id: str | None = None

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed:
            raise ValueError(f"write to closed file {self.key}")
        self._file.write(data)
        self.bytes += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._file.close()
            super().close()
            if self._uploads is not None:
                uploads, store = self._uploads
                # Not counted against the bound: queued, the file holds no memory;
                # running, it reads one part at a time from the spool, so the
                # threads hold at most one part each.
                uploads.submit(0, lambda: self.upload(store))
                self.uploading = True

    def upload(self, store: S3Store) -> None:
        """Initiate the upload and send every part; the caller aborts on failure."""
        parts_needed = max(1, -(-self.bytes // self._part_size))
        if parts_needed > MAX_PARTS:
            raise ZeroRenameError(
                f"{self.key} needs {parts_needed} parts, over S3's {MAX_PARTS}; raise part_size"
            )
        self.upload_id = store.create_upload(self.bucket, self.key)
        with open(self.spool_path, "rb") as spool:
            for number in range(1, parts_needed + 1):
                chunk = spool.read(self._part_size)
                try:
                    etag = store.upload_part(self.bucket, self.key, self.upload_id, number, chunk)
                except StoreError as exc:
                    self._on_part_failure(exc, self.key, self.upload_id)
                    raise
                self._parts.append(Part(number=number, etag=etag, size=len(chunk)))

    def pending(self) -> PendingUpload:
        assert self.upload_id is not None
        return PendingUpload(
            key=self.key,
            upload_id=self.upload_id,
            parts=tuple(self._parts),
            bytes=self.bytes,
            rows=self.rows,
            partition=self.partition,
            stats=self.stats,
        )

    def abort(self, store: S3Store) -> None:
        if not self.closed:  # closed without handing the file to the uploads
            self._file.close()
            super().close()
        if self.upload_id is not None:
            store.abort_upload(self.bucket, self.key, self.upload_id)
        try:
            os.unlink(self.spool_path)
        except FileNotFoundError:
            pass
