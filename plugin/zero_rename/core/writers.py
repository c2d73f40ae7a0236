"""Output files of a task attempt, in the two committer modes.

``magic`` streams parts into a multipart upload at the final key while the
task writes: memory is one part per open file and nothing touches local disk.
``staging`` spools to local disk and uploads at task commit. Either way the
upload is left pending: nothing is visible until job commit completes it.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable
from typing import BinaryIO

from zero_rename.core.model import Part, PendingUpload
from zero_rename.core.options import MAX_PARTS
from zero_rename.core.store import S3Store
from zero_rename.errors import StoreError, ZeroRenameError

# Called with (error, key, upload id) when a part upload failed: raises the
# error that explains it if the upload was aborted underneath the attempt (a
# job abort or commit swept it), or returns to let the error stand.
OnPartFailure = Callable[[StoreError, str, str], None]


def _ignore(_: StoreError, __: str, ___: str) -> None:
    return None

log = logging.getLogger(__name__)


class OutputFile(io.RawIOBase):
    """A writable binary file whose bytes become one pending upload.

    Callers may set :attr:`rows` so the manifest and ``_SUCCESS`` report row counts.
    """

    def __init__(self, bucket: str, key: str, partition: dict[str, str | None]) -> None:
        super().__init__()
        self.bucket = bucket
        self.key = key
        self.partition = dict(partition)
        self.rows: int | None = None
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
    """Uploads each full part as it is written; the last part at close."""

    def __init__(self, store: S3Store, bucket: str, key: str,
                 partition: dict[str, str | None], part_size: int,
                 on_part_failure: OnPartFailure = _ignore) -> None:
        super().__init__(bucket, key, partition)
        self._store = store
        self._part_size = part_size
        self._on_part_failure = on_part_failure
        self._buffer = bytearray()
        self._parts: list[Part] = []
        self.upload_id: str | None = store.create_upload(bucket, key)

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
        number = len(self._parts) + 1
        if number > MAX_PARTS:
            raise ZeroRenameError(
                f"{self.key} needs more than {MAX_PARTS} parts (S3's limit); raise part_size "
                f"above {self._part_size} bytes or write smaller files")
        assert self.upload_id is not None
        try:
            etag = self._store.upload_part(self.bucket, self.key, self.upload_id, number, chunk)
        except StoreError as exc:
            self._on_part_failure(exc, self.key, self.upload_id)
            raise
        self._parts.append(Part(number=number, etag=etag, size=len(chunk)))

    def close(self) -> None:
        if self.closed:
            return
        # A 0-byte file is one empty part: S3 exempts the last part from the minimum.
        if self._buffer or not self._parts:
            self._upload(bytes(self._buffer))
            self._buffer = bytearray()
        super().close()

    def pending(self) -> PendingUpload:
        assert self.upload_id is not None and self.closed
        return PendingUpload(key=self.key, upload_id=self.upload_id, parts=tuple(self._parts),
                             bytes=self.bytes, rows=self.rows, partition=self.partition)

    def abort(self, store: S3Store) -> None:
        if self.upload_id is not None:
            store.abort_upload(self.bucket, self.key, self.upload_id)
        if not self.closed:
            self._buffer = bytearray()
            super().close()


class StagingOutput(OutputFile):
    """Spools to a local file; :meth:`upload` sends it as parts at task commit."""

    def __init__(self, bucket: str, key: str, partition: dict[str, str | None],
                 spool_path: str, part_size: int,
                 on_part_failure: OnPartFailure = _ignore) -> None:
        super().__init__(bucket, key, partition)
        self.spool_path = spool_path
        self._part_size = part_size
        self._on_part_failure = on_part_failure
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

    def upload(self, store: S3Store) -> None:
        """Initiate the upload and send every part; the caller aborts on failure."""
        parts_needed = max(1, -(-self.bytes // self._part_size))
        if parts_needed > MAX_PARTS:
            raise ZeroRenameError(f"{self.key} needs {parts_needed} parts, over S3's "
                                  f"{MAX_PARTS}; raise part_size")
        self.upload_id = store.create_upload(self.bucket, self.key)
        with open(self.spool_path, "rb") as spool:
            for number in range(1, parts_needed + 1):
                chunk = spool.read(self._part_size)
                try:
                    etag = store.upload_part(self.bucket, self.key, self.upload_id, number,
                                             chunk)
                except StoreError as exc:
                    self._on_part_failure(exc, self.key, self.upload_id)
                    raise
                self._parts.append(Part(number=number, etag=etag, size=len(chunk)))

    def pending(self) -> PendingUpload:
        assert self.upload_id is not None
        return PendingUpload(key=self.key, upload_id=self.upload_id, parts=tuple(self._parts),
                             bytes=self.bytes, rows=self.rows, partition=self.partition)

    def abort(self, store: S3Store) -> None:
        self.close()
        if self.upload_id is not None:
            store.abort_upload(self.bucket, self.key, self.upload_id)
        try:
            os.unlink(self.spool_path)
        except FileNotFoundError:
            pass
