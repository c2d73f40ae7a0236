"""A reader that takes a path reads an Iceberg table of zero-rename's by its
metadata file: PyIceberg's ``StaticTable``, given the catalog's current metadata
location (``_iceberg/metadata/<n>-<uuid>.metadata.json``), reads exactly the
committed rows, and a table folder without ``metadata/`` holds no table for a
reader that looks there (docs/table-formats.md, "Readers that take a path")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from tests.core.tables.test_table_uploads import user_table, written
from zero_rename.core.committer import Committer
from zero_rename.core.tables.iceberg_catalog import HOME_VARIABLE

pytestmark = pytest.mark.s3


def test_the_table_is_read_by_its_metadata_file(
    committer: Committer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "iceberg"))
    c = committer
    for n, day in enumerate(("2024-01-01", "2024-01-02")):
        c.commit_job(written(c, day, [n]).job_id)
    location = user_table(c).metadata_location
    assert location.startswith(f"{c.dest.url}/_iceberg/metadata/00002-")
    assert location.endswith(".metadata.json")
    properties = {
        "s3.endpoint": c.store.endpoint_url,
        "s3.region": "us-east-1",
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    table = StaticTable.from_metadata(location, properties)
    rows = sorted((r["dt"], r["id"]) for r in table.scan().to_arrow().to_pylist())
    assert rows == [("2024-01-01", 0), ("2024-01-02", 1)]
    # What a reader given the destination's folder looks in holds nothing.
    assert list(c.store.list_objects(c.dest.bucket, c.dest.dir + "metadata/")) == []
