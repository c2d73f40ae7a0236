"""Bounded pieces of unbounded lists: shards of JSON lines, and compact key sets.

A job of a million files must commit in constant memory: its plan, its journal
and its file list are written as shards of at most :data:`SHARD_SIZE` items
(gzip-compressed JSON lines, create-only) and read back one at a time; what
must be looked up across the whole job (is this upload pending? is this key
written twice?) is kept as 64-bit digests in a sorted ``array``, 8 bytes an
item instead of a few hundred for the strings and model objects.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import io
import json
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from pydantic import BaseModel

from zero_rename.core.s3.client import S3Store
from zero_rename.core.s3.writes import create_once, put_checked
from zero_rename.errors import ManifestError

M = TypeVar("M", bound=BaseModel)

# Items a shard holds at most: a shard of pending uploads is a few MB of JSON
# before compression, and at most one is in memory at a time.
SHARD_SIZE = 10_000
# gzip level 1: a tenth of the JSON's size for a fraction of level 6's CPU.
_LEVEL = 1


def encode_line(item: BaseModel) -> bytes:
    """One item's line of a shard (:func:`encode_lines`)."""
    return item.model_dump_json(by_alias=True).encode("utf-8") + b"\n"


def encode(items: Iterable[BaseModel]) -> bytes:
    return encode_lines(encode_line(item) for item in items)


def encode_lines(lines: Iterable[bytes]) -> bytes:
    """A shard's bytes from its items' lines (:func:`encode_line`): a shard being filled
    is kept as its lines, a few hundred bytes an item, not as the items."""
    # mtime=0: the same items give the same bytes, so a create-only write
    # retried after a lost answer is recognised as its own.
    return gzip.compress(b"".join(lines), compresslevel=_LEVEL, mtime=0)


def decode(cls: type[M], data: bytes, where: str) -> list[M]:
    return list(decode_lines(cls, data, where))


def decode_lines(cls: type[M], data: bytes, where: str) -> Iterator[M]:
    """The shard's items, one at a time; raises ManifestError at the first line that
    is not a valid ``cls`` (a caller acts on a shard only once it has read it all)."""
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        # A damaged deflate stream is a zlib.error, a cut-off one an EOFError,
        # a bad header gzip.BadGzipFile (an OSError).
        raise ManifestError(f"{where} is not a gzip-compressed shard: {exc}") from None
    # Line by line from the text, not a list of all its lines beside it.
    for number, text_line in enumerate(io.BytesIO(text), 1):
        if text_line.strip():
            try:
                item = cls.model_validate_json(text_line)
            except ValueError as exc:
                raise ManifestError(
                    f"{where} line {number} is not a valid {cls.__name__}: "
                    f"{str(exc).splitlines()[0]}"
                ) from None
            yield item


def body_digest(data: bytes) -> str:
    """The identity of an object's bytes as written (SHA-256, hex): kept where the
    object is named (a plan's header, the job record), so that an object
    changed afterwards is refused instead of trusted."""
    return hashlib.sha256(data).hexdigest()


def write_shard(
    store: S3Store, bucket: str, key: str, items: Sequence[BaseModel], overwrite: bool = False
) -> str:
    """Write a shard once; returns its :func:`body_digest`. Raises ManifestError if
    the key holds another shard."""
    return put_shard(store, bucket, key, encode(items), overwrite)


def put_shard(store: S3Store, bucket: str, key: str, body: bytes, overwrite: bool = False) -> str:
    """:func:`write_shard` of a shard already encoded (:func:`encode`)."""
    if overwrite:
        put_checked(store, bucket, key, body, content_type="application/gzip")
    else:
        create_shard(store, bucket, key, body)
    return body_digest(body)


def create_shard(store: S3Store, bucket: str, key: str, body: bytes) -> None:
    """Create a shard from its bytes (:func:`encode`), once; raises ManifestError if
    the key holds another shard."""
    if create_once(store, bucket, key, body, content_type="application/gzip") is not None:
        raise ManifestError(f"s3://{bucket}/{key} already holds another shard")


def read_shard(
    store: S3Store, bucket: str, key: str, cls: type[M], expected_digest: str = ""
) -> list[M]:
    """The shard's items; with ``expected_digest`` (from :func:`write_shard`), a shard
    whose bytes changed since it was written is refused."""
    return decode(cls, read_shard_body(store, bucket, key, expected_digest), f"s3://{bucket}/{key}")


def read_shard_body(store: S3Store, bucket: str, key: str, expected_digest: str = "") -> bytes:
    """The shard's bytes, checked as :func:`read_shard` checks them, to decode."""
    found = store.get_object(bucket, key)
    if found is None:
        raise ManifestError(f"shard s3://{bucket}/{key} is missing")
    check_digest(found[0], expected_digest, f"shard s3://{bucket}/{key}")
    return found[0]


def check_digest(data: bytes, expected: str, what: str) -> None:
    """Refuse ``data`` unless it is what was written (``expected``: its digest then;
    empty for objects written before digests were kept)."""
    if expected and body_digest(data) != expected:
        raise ManifestError(
            f"{what} changed after it was written (its SHA-256 is not the one recorded); "
            "something outside zero-rename rewrote it, so it is not trusted"
        )


def shard_key(prefix: str, name: str, number: int) -> str:
    return f"{prefix}{name}-{number:05d}.jsonl.gz"


def digest(*parts: str) -> int:
    """A 64-bit digest of the parts; collisions among a million items have a
    probability near 3e-8, and one would only make a check pass that S3 repeats."""
    data = "\0".join(parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _sort_in_place(items: array[int]) -> None:
    """Sort ``items`` where they are: moved into buckets by their top byte within the
    array itself (an American flag sort), then each bucket sorted through a list of
    its own. A sorted copy of the whole array would hold it twice, or as Python
    ints (about 40 bytes each where the array holds 8); this holds one bucket's
    ints. Digests are uniform, so the buckets are even."""
    counts = [0] * 256
    for value in items:
        counts[value >> 56] += 1
    starts, ends, total = [], [], 0
    for count in counts:
        starts.append(total)
        total += count
        ends.append(total)
    free = list(starts)  # per bucket, its first place not yet filled
    for bucket in range(256):
        for i in range(free[bucket], ends[bucket]):
            value = items[i]
            top = value >> 56
            while top != bucket:
                place = free[top]
                free[top] = place + 1
                items[place], value = value, items[place]
                top = value >> 56
            items[i] = value
    for lo, hi in zip(starts, ends, strict=True):
        if hi - lo > 1:
            items[lo:hi] = array("Q", sorted(items[lo:hi]))


class KeySet:
    """A set of 64-bit digests: add, then ``freeze``, then look up in O(log n)."""

    def __init__(self) -> None:
        self._items = array("Q")
        self._frozen = False

    def add(self, value: int) -> None:
        self._items.append(value)

    def extend(self, values: array[int]) -> None:
        self._items.extend(values)

    def freeze(self) -> KeySet:
        if not self._frozen:
            _sort_in_place(self._items)
            self._frozen = True
        return self

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, value: object) -> bool:
        assert self._frozen, "freeze() before looking up"
        i: int = bisect_left(self._items, value)  # type: ignore[call-overload]
        return i < len(self._items) and self._items[i] == value

    def repeated(self) -> set[int]:
        """Digests added more than once."""
        self.freeze()
        items = self._items
        return {items[i] for i in range(1, len(items)) if items[i] == items[i - 1]}

    def marks(self) -> bytearray:
        """A mark per member, none set: for :meth:`mark` and :meth:`unmarked`. A byte
        each, so that threads marking at once never share one (a bit each would
        be a read and a write of a shared byte)."""
        self.freeze()
        return bytearray(len(self._items))

    def mark(self, value: int, marks: bytearray) -> None:
        """Mark ``value`` (every copy of it) in ``marks``, if a member."""
        items = self._items
        i = bisect_left(items, value)
        while i < len(items) and items[i] == value:
            marks[i] = 1
            i += 1

    def unmarked(self, marks: bytearray) -> set[int]:
        """Members not marked in ``marks``."""
        items, start = self._items, marks.find(0)
        if start < 0:
            return set()
        return {items[i] for i in range(start, len(items)) if not marks[i]}

    def __iter__(self) -> Iterator[int]:
        return iter(self._items)


# Strings a run of :class:`StringRuns` holds: a run is kept compressed, and is
# whole in memory only while it is filled (a list of that many strings).
RUN_SIZE = 10_000


class StringRuns:
    """Strings kept compressed, in runs of :data:`RUN_SIZE` (JSON lines, deflated): a
    few bytes a task id or attempt id where a Python string costs 50 to 100.
    Iterated in the order added; with ``sort``, each run is sorted as it is
    sealed, and :meth:`merged` yields every string in order, inflating each run a
    piece at a time."""

    def __init__(self, sort: bool = False) -> None:
        self._sort = sort
        self._runs: list[bytes] = []
        self._buffer: list[str] = []
        self._count = 0

    def add(self, text: str) -> None:
        self._buffer.append(text)
        self._count += 1
        if len(self._buffer) >= RUN_SIZE:
            self._runs.append(self._sealed())
            self._buffer = []

    def _sealed(self) -> bytes:
        items = sorted(self._buffer) if self._sort else self._buffer
        lines = "\n".join(json.dumps(item) for item in items).encode("ascii")
        return zlib.compress(lines, _LEVEL)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        for run in self._runs:
            yield from _run_items(run)
        yield from sorted(self._buffer) if self._sort else list(self._buffer)

    def merged(self) -> Iterator[str]:
        """Every string, sorted (``sort`` runs only)."""
        assert self._sort, "merged() of runs kept unsorted"
        return heapq.merge(*(_run_items(run) for run in self._runs), sorted(self._buffer))


def _run_items(run: bytes) -> Iterator[str]:
    """A run's strings, inflated 64 KiB at a time."""
    inflate = zlib.decompressobj()
    rest, data = b"", run
    while data:
        piece = inflate.decompress(data, 1 << 16)
        data = inflate.unconsumed_tail
        *lines, rest = (rest + piece).split(b"\n")
        for line in lines:
            yield json.loads(line)
    rest += inflate.flush()
    if rest:
        yield json.loads(rest)
