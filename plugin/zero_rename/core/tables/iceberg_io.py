"""PyIceberg's FileIO for the tables zero-rename publishes to: one request a
metadata object, and every write's key noted when it ends.

PyIceberg writes each manifest, manifest list and ``metadata.json`` through
pyarrow's S3 file system, which by default sends any object, however small,
as a multipart upload: CreateMultipartUpload, UploadPart, Complete. When the
answer to the create is lost, its client starts another upload and finishes
that one, and the first stays pending forever under ``_iceberg/``. With
``allow_delayed_open`` pyarrow holds the first part until the stream closes and
sends an object smaller than a part (10 MiB) as one PutObject, which leaves
nothing pending whatever answer is lost, and saves two requests a write.

Larger objects (a manifest of tens of thousands of files) still go as multipart
uploads: their keys are noted when their writes end (:mod:`.ended`), so that
the job's cleanup aborts what a lost answer left at them.

Which PyIceberg and pyarrow internals this leans on is guarded by
tests/core/tables/test_iceberg_internals.py.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from pyarrow.fs import FileSystem, S3FileSystem
from pyiceberg.io import OutputStream
from pyiceberg.io.pyarrow import BUFFER_SIZE, ONE_MEGABYTE, PyArrowFile, PyArrowFileIO

from zero_rename.core.tables.ended import note_ended

# Where a catalog's configuration names its FileIO, and ours.
PY_IO_IMPL = "py-io-impl"
SINGLE_REQUEST_IO = f"{__name__}.SingleRequestFileIO"


class SingleRequestFileIO(PyArrowFileIO):
    """PyArrowFileIO whose S3 writes are one PutObject below pyarrow's part size,
    and whose writes note their key when they end."""

    def _initialize_s3_fs(self, netloc: str | None) -> FileSystem:
        return delayed_open(super()._initialize_s3_fs(netloc))

    def new_output(self, location: str) -> PyArrowFile:
        # As PyArrowFileIO.new_output makes its file, of the class that notes.
        scheme, netloc, path = self.parse_location(location, self.properties)
        return _NotedFile(
            fs=self.fs_by_scheme(scheme, netloc),
            location=location,
            path=path,
            buffer_size=int(self.properties.get(BUFFER_SIZE, ONE_MEGABYTE)),
        )


def delayed_open(fs: FileSystem) -> FileSystem:
    """``fs`` with ``allow_delayed_open``, every other setting as PyIceberg chose
    it: rebuilt from its own pickled state, which holds them all."""
    if not isinstance(fs, S3FileSystem):
        return fs
    rebuild, (state, *more) = fs.__reduce__()
    rebuilt: FileSystem = rebuild({**state, "allow_delayed_open": True}, *more)
    return rebuilt


class _NotedFile(PyArrowFile):
    """A PyArrowFile whose output stream notes its key when it closes."""

    def create(self, overwrite: bool = False) -> OutputStream:
        stream = super().create(overwrite)
        return _NotedStream(stream, self.location)


class _NotedStream:
    """An output stream that notes its S3 key as ended once closed, however."""

    def __init__(self, stream: OutputStream, location: str) -> None:
        self._stream = stream
        parts = urlsplit(location)
        self._where = (parts.netloc, parts.path.lstrip("/")) if parts.scheme[:2] == "s3" else None

    def write(self, data: bytes) -> int:
        return self._stream.write(data)

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            if self._where is not None:
                note_ended(*self._where)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __enter__(self) -> _NotedStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
