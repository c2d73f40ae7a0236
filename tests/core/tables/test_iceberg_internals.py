"""What zero-rename leans on in PyIceberg (pinned at 0.12.0) and pyarrow beyond
their public API, checked so that a version that changes any of it fails here,
by name, rather than in a commit.

- ``_SnapshotProducer._snapshot_id`` (core/tables/iceberg.py): a job's snapshot
  gets an id derived from the job id, set on the producer before it commits, and
  PyIceberg's own retry of a refused commit must keep it (it is how a commit
  racing its own retry finds the job landed, rather than adding it twice).
- ``PyArrowFileIO._initialize_s3_fs``, ``fs_by_scheme``, ``parse_location`` and
  ``PyArrowFile``'s constructor (core/tables/iceberg_io.py): the FileIO whose S3
  writes are one PutObject below a part, and which notes each write's end.
- pyarrow's ``S3FileSystem.__reduce__``: the settings PyIceberg chose, rebuilt
  with ``allow_delayed_open``.
- ``py-io-impl``: a catalog's FileIO named by its properties.
- ``AvroOutputFile``'s ``writer``, ``encoder``, ``sync_bytes`` and
  ``compression_codec``, and ``ManifestWriter.new_writer``
  (core/tables/iceberg_blocks.py): a manifest's entries written many to a block.
- the private names imported by core/tables (``_FastAppendFiles``,
  ``_OverwriteFiles``, ``_pyarrow_to_schema_without_ids``).

Runs on the local file system: no S3 server, about a second.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow.fs import S3FileSystem
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import load_file_io
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriter,
    write_manifest,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from zero_rename.core.tables import ended, iceberg_blocks, iceberg_io
from zero_rename.core.tables.iceberg_io import (
    PY_IO_IMPL,
    SINGLE_REQUEST_IO,
    SingleRequestFileIO,
    delayed_open,
)

PRIVATE_NAMES = {
    "pyiceberg.table.update.snapshot": ("_FastAppendFiles", "_OverwriteFiles"),
    "pyiceberg.io.pyarrow": ("_pyarrow_to_schema_without_ids", "BUFFER_SIZE", "ONE_MEGABYTE"),
}
S3_PROPERTIES = {
    "s3.endpoint": "http://127.0.0.1:9",
    "s3.region": "eu-west-3",
    "s3.access-key-id": "AKIDEXAMPLE",
    "s3.secret-access-key": "secret",
    "s3.request-timeout": "7",
}


@pytest.fixture
def table(tmp_path: Path) -> Table:
    catalog = SqlCatalog(
        "internals", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh"
    )
    catalog.create_namespace("ns")
    created = catalog.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
    created.append(pa.table({"id": [1]}))
    return catalog.load_table("ns.t")


def test_the_private_names_core_tables_imports_exist() -> None:
    for module, names in PRIVATE_NAMES.items():
        missing = [n for n in names if not hasattr(importlib.import_module(module), n)]
        assert not missing, f"{module} no longer has {missing}: core/tables imports them"


def test_a_snapshot_producer_commits_the_id_it_is_given_through_a_retry(table: Table) -> None:
    """Set after the producer is made, kept by PyIceberg's own retry of a commit
    the catalog refused because another writer's landed first."""
    other = table.catalog.load_table("ns.t")
    other.append(pa.table({"id": [2]}))  # lands first: the next commit is retried
    transaction = table.transaction()
    producer = transaction.update_snapshot(snapshot_properties={"k": "v"}).fast_append()
    assert hasattr(producer, "_snapshot_id"), "the snapshot producer has no _snapshot_id"
    producer._snapshot_id = 987_654_321
    producer._refresh_for_retry()
    assert producer._snapshot_id == 987_654_321, "a retry no longer keeps the snapshot id"
    producer.commit()
    transaction.commit_transaction()
    assert producer.snapshot_id == 987_654_321
    snapshots = table.catalog.load_table("ns.t").snapshots()
    assert snapshots[-1].snapshot_id == 987_654_321 and len(snapshots) == 3


def test_the_file_io_rebuilds_pyicebergs_s3_file_system_with_delayed_open() -> None:
    io = SingleRequestFileIO(S3_PROPERTIES)
    fs = io.fs_by_scheme("s3", "bkt")
    assert isinstance(fs, S3FileSystem)
    rebuild, (state, *_) = fs.__reduce__()
    assert isinstance(state, dict), "pyarrow's S3FileSystem pickles its settings otherwise"
    assert state["allow_delayed_open"] is True
    assert state["endpoint_override"] == "http://127.0.0.1:9"
    assert (state["region"], state["request_timeout"]) == ("eu-west-3", 7.0)
    assert delayed_open(fs).__reduce__()[1][0] == state  # rebuilt as it was


def test_the_file_io_notes_each_write_when_it_ends(tmp_path: Path) -> None:
    io = SingleRequestFileIO(S3_PROPERTIES)  # a region given: PyIceberg asks AWS for none
    target = tmp_path / "x.metadata.json"
    with io.new_output(str(target)).create(overwrite=True) as stream:
        stream.write(b"{}")
    assert target.read_bytes() == b"{}"
    # What it wrote is known after: its size, and its bytes (kept, not read again).
    target.write_bytes(b"[]")
    assert len(io.new_input(str(target))) == 2
    with io.new_input(str(target)).open() as stream:
        assert stream.read() == b"{}"
    iceberg_io.forget()
    with io.new_input(str(target)).open() as stream:
        assert stream.read() == b"[]"
    # Keys are noted for S3 locations only; the stream is what PyIceberg writes through.
    noted = io.new_output("s3://bkt/t/_iceberg/metadata/00001-x.metadata.json")
    assert type(noted).__name__ == "_NotedFile" and noted.location.startswith("s3://bkt/")
    ended.note_ended("bkt", "t/_iceberg/metadata/00001-x.metadata.json")
    assert ended.take_ended("bkt", "t/_iceberg/") == {"t/_iceberg/metadata/00001-x.metadata.json"}
    assert ended.take_ended("bkt", "t/_iceberg/") == set()


def test_a_catalogs_file_io_is_named_by_its_properties() -> None:
    io = load_file_io({PY_IO_IMPL: SINGLE_REQUEST_IO, **S3_PROPERTIES}, "s3://bkt/t")
    assert isinstance(io, SingleRequestFileIO)


def test_a_manifest_in_blocks_reads_back_as_pyicebergs_own(
    table: Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same entries through PyIceberg's writer (a block an entry) and in blocks
    (two of 400 and the rest): read back alike, the blocks' file smaller."""
    monkeypatch.setattr(iceberg_blocks, "BLOCK_ENTRIES", 400)
    files = [
        DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"file://{tmp_path}/data/{i}.parquet",
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=i * 70_001,
            file_size_in_bytes=700 + i,
            value_counts={1: i * 70_001},
            null_value_counts={1: 0},
            nan_value_counts={},
            lower_bounds={1: i.to_bytes(8, "little")},
            upper_bounds={1: (i * 2).to_bytes(8, "little")},
        )
        for i in range(1100)
    ]

    def write(path: str, blocks: bool) -> list[tuple[str, int, dict[int, bytes]]]:
        def make(spec: PartitionSpec) -> ManifestWriter:
            output = table.io.new_output(f"file://{tmp_path}/{path}")
            return write_manifest(2, spec, table.schema(), output, 1, "deflate")

        with (iceberg_blocks.in_blocks(make) if blocks else make)(table.spec()) as writer:
            for made in files:
                writer.add(
                    ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=made)
                )
        entries = writer.to_manifest_file().fetch_manifest_entry(table.io)
        return [
            (e.data_file.file_path, e.data_file.record_count, e.data_file.lower_bounds)
            for e in entries
        ]

    plain, blocked = write("plain.avro", False), write("blocks.avro", True)
    assert blocked == plain and len(blocked) == 1100
    assert (tmp_path / "blocks.avro").stat().st_size < (tmp_path / "plain.avro").stat().st_size / 2
