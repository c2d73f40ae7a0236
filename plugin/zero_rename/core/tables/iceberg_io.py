"""PyIceberg's FileIO for the tables zero-rename publishes to: one request a
metadata object, read or written, and every write's key noted when it ends.

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

Reads and checks are cut to what a commit needs, since an Iceberg commit's
metadata objects are never changed once written (each is named by a fresh
UUID, or a version and one):

- a read is one GET of the whole object, sent by the job's own store client
  where the catalog reaches S3 as the store does (pyarrow's files ask the size
  with a HEAD first), and a metadata object read or written by this
  process is kept (:data:`CACHE_BYTES` in all), so that the catalog's commit,
  which loads the table again, and a replace, which reads the manifest list and
  the replaced partitions' manifests for its own planning and for PyIceberg's,
  read each object once;
- the size of an object this process wrote (a manifest's, for the manifest
  list) is known without a HEAD;
- a write does not first check that its key is free (a HEAD and a LIST): the
  key is a fresh UUID's, so nothing is there to overwrite.

Which PyIceberg and pyarrow internals this leans on is guarded by
tests/core/tables/test_iceberg_internals.py.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
from pyarrow.fs import FileSystem, S3FileSystem
from pyiceberg.io import InputStream, OutputStream
from pyiceberg.io.pyarrow import BUFFER_SIZE, ONE_MEGABYTE, PyArrowFile, PyArrowFileIO

from zero_rename.core.s3.client import S3Store
from zero_rename.core.tables.ended import note_ended

# Where a catalog's configuration names its FileIO, and ours.
PY_IO_IMPL = "py-io-impl"
SINGLE_REQUEST_IO = f"{__name__}.SingleRequestFileIO"
# Metadata objects kept by location, this many bytes at most in all, the least
# recently used dropped first; an object larger than a quarter of it is not kept.
CACHE_BYTES = 32 * 1024 * 1024
# Names of the objects Iceberg never changes once written.
_IMMUTABLE = (".metadata.json", ".metadata.json.gz", ".gz.metadata.json", ".avro")


class _Kept:
    """Metadata objects by location, bounded by their bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._objects: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, location: str) -> bytes | None:
        with self._lock:
            data = self._objects.get(location)
            if data is not None:
                self._objects.move_to_end(location)
            return data

    def put(self, location: str, data: bytes) -> None:
        if not location.endswith(_IMMUTABLE) or len(data) > self.limit // 4:
            return
        with self._lock:
            old = self._objects.pop(location, None)
            self._bytes += len(data) - (len(old) if old is not None else 0)
            self._objects[location] = data
            while self._bytes > self.limit:
                _, dropped = self._objects.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._objects.clear()
            self._bytes = 0


KEPT = _Kept(CACHE_BYTES)
# Sizes of the objects this process wrote, by location (the latest few hundred).
_WRITTEN: OrderedDict[str, int] = OrderedDict()
_WRITTEN_LIMIT = 512
_WRITTEN_LOCK = threading.Lock()


# The job's store for the buckets whose catalog reaches S3 as it does, by bucket.
# Keyed by the bucket, and the endpoint and access key the FileIO is given, so
# that a FileIO reaching S3 otherwise (another catalog's) is never read for.
_STORES: dict[tuple[str, str, str], S3Store] = {}
_ENDPOINT, _ACCESS_KEY = "s3.endpoint", "s3.access-key-id"


def read_with(bucket: str, properties: dict[str, str], store: S3Store) -> None:
    """Read the metadata objects in ``bucket`` that a FileIO of these properties
    reads with ``store``'s client, which reaches S3 as they say: one GET each."""
    _STORES[bucket, properties.get(_ENDPOINT, ""), properties.get(_ACCESS_KEY, "")] = store


def _get(store: S3Store | None, location: str) -> bytes | None:
    """The object at ``location`` through ``store``; None without one (pyarrow reads
    it then). Raises FileNotFoundError for a missing one."""
    if store is None:
        return None
    parts = urlsplit(location)
    found = store.get_object(parts.netloc, parts.path.lstrip("/"))
    if found is None:
        raise FileNotFoundError(f"Cannot open file, does not exist: {location}")
    return found[0]


def forget() -> None:
    """Drop what this process keeps of metadata objects, as a fresh process starts."""
    KEPT.clear()
    with _WRITTEN_LOCK:
        _WRITTEN.clear()


class SingleRequestFileIO(PyArrowFileIO):
    """PyArrowFileIO whose S3 writes are one PutObject below pyarrow's part size,
    and whose writes note their key when they end."""

    def _initialize_s3_fs(self, netloc: str | None) -> FileSystem:
        return delayed_open(super()._initialize_s3_fs(netloc))

    def new_input(self, location: str) -> PyArrowFile:
        return self.new_output(location)

    def new_output(self, location: str) -> PyArrowFile:
        # As PyArrowFileIO.new_output makes its file, of the class that notes.
        scheme, netloc, path = self.parse_location(location, self.properties)
        made = _NotedFile(
            fs=self.fs_by_scheme(scheme, netloc),
            location=location,
            path=path,
            buffer_size=int(self.properties.get(BUFFER_SIZE, ONE_MEGABYTE)),
        )
        if scheme in ("s3", "s3a", "s3n"):
            key = (
                netloc or "",
                self.properties.get(_ENDPOINT, ""),
                self.properties.get(_ACCESS_KEY, ""),
            )
            made.store = _STORES.get(key)
        return made


def delayed_open(fs: FileSystem) -> FileSystem:
    """``fs`` with ``allow_delayed_open``, every other setting as PyIceberg chose
    it: rebuilt from its own pickled state, which holds them all."""
    if not isinstance(fs, S3FileSystem):
        return fs
    rebuild, (state, *more) = fs.__reduce__()
    rebuilt: FileSystem = rebuild({**state, "allow_delayed_open": True}, *more)
    return rebuilt


class _NotedFile(PyArrowFile):
    """A PyArrowFile read in one request, its metadata kept, whose output stream
    notes its key when it closes."""

    store: S3Store | None = None  # reads through this store's client, if given

    def open(self, seekable: bool = True) -> InputStream:
        """A metadata object whole, read with one GET (or kept from an earlier read
        or write); seekable, as PyIceberg's readers take it. A data file (a
        footer read) as pyarrow opens it, for ranged reads."""
        if not self.location.endswith(_IMMUTABLE):
            return super().open(seekable)
        data = KEPT.get(self.location) or _get(self.store, self.location)
        if data is None:
            with super().open(seekable=False) as stream:
                data = stream.read()
        KEPT.put(self.location, data)
        reader: InputStream = pa.BufferReader(data)
        return reader

    def __len__(self) -> int:
        size = _WRITTEN.get(self.location)
        return size if size is not None else super().__len__()

    def exists(self) -> bool:
        return self.location in _WRITTEN or super().exists()

    def create(self, overwrite: bool = False) -> OutputStream:
        # No check that the key is free (a HEAD and a LIST): every metadata
        # object's name is a fresh UUID's.
        stream = super().create(overwrite=True)
        return _NotedStream(stream, self.location)


class _NotedStream:
    """An output stream that notes its S3 key as ended once closed, however, and
    keeps what it wrote: its size, and its bytes while they are few."""

    def __init__(self, stream: OutputStream, location: str) -> None:
        self._stream = stream
        self._location = location
        self._written = 0
        self._kept: list[bytes] | None = []
        parts = urlsplit(location)
        self._where = (parts.netloc, parts.path.lstrip("/")) if parts.scheme[:2] == "s3" else None

    def write(self, data: bytes) -> int:
        written = self._stream.write(data)
        self._written += len(data)
        if self._kept is not None:
            self._kept.append(bytes(data))
            if self._written > KEPT.limit // 4:
                self._kept = None
        return written

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            if self._where is not None:
                note_ended(*self._where)
        # Written whole (close raised nothing): its size and bytes are known.
        with _WRITTEN_LOCK:
            _WRITTEN[self._location] = self._written
            while len(_WRITTEN) > _WRITTEN_LIMIT:
                _WRITTEN.popitem(last=False)
        if self._kept is not None:
            KEPT.put(self._location, b"".join(self._kept))

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
