"""A job's manifest written in Avro blocks of many entries, not one block an entry.

PyIceberg's manifest writer writes every entry as an Avro block of its own: its
count, a deflate stream of one entry, and the 16-byte sync marker, each entry
through an encoder that writes every varint byte by byte to a stream. For a job of
10,000 files that was most of the table commit's CPU. Here the entries a writer is
given are buffered and written :data:`BLOCK_ENTRIES` to a block (Avro allows any
count; Iceberg's own writers fill blocks of many), encoded into a list of byte
strings, small varints from a cache; the file, its header and every entry's bytes
are what PyIceberg writes, only grouped into fewer blocks.

This leans on the names inside PyIceberg's ``AvroOutputFile`` (``writer``,
``encoder``, ``sync_bytes``, ``compression_codec``) and ``ManifestWriter``
(``new_writer``); the tests write a manifest both ways and read them back alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any

from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.manifest import ManifestWriter
from pyiceberg.partitioning import PartitionSpec

# Entries a block: some 200 KB of encoded entries, compressed at once; what is
# buffered stays small at any count of files.
BLOCK_ENTRIES = 1000


@functools.lru_cache(maxsize=1 << 14)
def _varint(integer: int) -> bytes:
    """Avro's zig-zag variable-length encoding of a long."""
    datum = (integer << 1) ^ (integer >> 63)
    out = bytearray()
    while datum & ~0x7F:
        out.append((datum & 0x7F) | 0x80)
        datum >>= 7
    out.append(datum)
    return bytes(out)


class _ListEncoder(BinaryEncoder):
    """PyIceberg's encoder into a list of byte strings, joined once."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self._append = self.parts.append

    def write(self, b: bytes) -> None:
        self._append(b)

    def write_int(self, integer: int) -> None:
        self._append(_varint(integer))

    def write_bytes(self, b: bytes) -> None:
        self._append(_varint(len(b)))
        self._append(b)

    def write_boolean(self, boolean: bool) -> None:
        self._append(b"\x01" if boolean else b"\x00")

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Blocks:
    """An ``AvroOutputFile`` whose ``write_block`` buffers objects, written
    :data:`BLOCK_ENTRIES` to a block, the rest when the file is closed."""

    def __init__(self, file: AvroOutputFile[Any]) -> None:
        self.file = file
        self.pending: list[Any] = []

    def __enter__(self) -> _Blocks:
        self.file.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.flush()
        self.file.__exit__(exc_type, exc_value, traceback)

    @property
    def output_file(self) -> Any:
        return self.file.output_file

    def tell(self) -> int:
        self.flush()
        return int(self.file.output_stream.tell())

    def write_block(self, objects: list[Any]) -> None:
        self.pending += objects
        if len(self.pending) >= BLOCK_ENTRIES:
            self.flush()

    def flush(self) -> None:
        """One block of the buffered objects, as ``AvroOutputFile.write_block`` writes one."""
        if not self.pending:
            return
        file, objects, self.pending = self.file, self.pending, []
        encoder = _ListEncoder()
        for obj in objects:
            file.writer.write(encoder, obj)
        content = encoder.getvalue()
        codec = file.compression_codec()
        length = len(content)
        if codec is not None:
            content, length = codec.compress(content)
        file.encoder.write_int(len(objects))
        file.encoder.write_int(length)
        file.encoder.write(content)
        file.encoder.write(file.sync_bytes)


def in_blocks(
    make: Callable[[PartitionSpec], ManifestWriter],
) -> Callable[[PartitionSpec], ManifestWriter]:
    """A snapshot producer's ``new_manifest_writer`` whose writers write in blocks."""

    def made(spec: PartitionSpec) -> ManifestWriter:
        writer = make(spec)
        new_writer = writer.new_writer
        writer.new_writer = lambda: _Blocks(new_writer())  # type: ignore[method-assign,assignment,return-value]
        return writer

    return made
