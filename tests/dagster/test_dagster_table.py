"""The Dagster definitions with ``ZERO_RENAME_DAGSTER_TABLE_FORMAT=delta``: each committed
day is one Delta version, named in the materialization's (and the commit op's)
metadata, and read back by deltalake and Polars."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dagster.conftest import load_defs, materialize
from tests.helpers import pending_in_bucket
from tests.table_readers import delta_versions, read
from zero_rename.core.committer import Committer

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

DAY = "2024-01-01"


def test_each_committed_day_is_one_delta_version_named_in_its_metadata(
    dagster_spark: None, daily: Committer, instance: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZERO_RENAME_DAGSTER_TABLE_FORMAT", "delta")
    defs = load_defs(daily.dest.url)
    result = materialize(defs, instance, DAY, 300)

    assert result.success
    (event,) = result.asset_materializations_for_node("daily_events")
    meta = {k: getattr(v, "value", v) for k, v in event.metadata.items()}
    job_id = meta["job_id"]
    record = daily.job(job_id)
    assert record.options.table_format == "delta" and record.table_commit is not None
    versions = delta_versions(daily.dest.url)
    assert versions == {job_id: record.table_commit.id}
    assert (meta["table_format"], meta["table"], meta["table_commit"]) == (
        "delta",
        daily.dest.url,
        record.table_commit.id,
    )
    assert meta["table_files_added"] == meta["files"] and meta["table_files_removed"] == 0
    # A Delta table has no name but its path, dagster/uri; the schema as the tasks recorded it.
    assert "dagster/table_name" not in meta and meta["dagster/uri"] == daily.dest.url
    assert [c.name for c in meta["dagster/column_schema"].columns][-1] == "dt"
    for reader in ("own", "polars"):
        assert read("delta", daily.dest.url, reader).num_rows == 300, reader

    # The steps job replaces the day: one more version, its commit in the commit op's metadata.
    steps = defs.resolve_job_def("daily_events_steps").execute_in_process(
        partition_key=DAY, instance=instance, raise_on_error=False
    )
    assert steps.success
    (output,) = [
        e
        for e in steps.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.step_key == "commit"
    ]
    op_meta = {k: getattr(v, "value", v) for k, v in output.event_specific_data.metadata.items()}
    first, second = daily.jobs()
    assert second.table_commit is not None
    assert second.table_commit.removed_files == meta["files"]
    assert delta_versions(daily.dest.url) == {
        first.job_id: record.table_commit.id,
        second.job_id: second.table_commit.id,
    }
    assert (op_meta["table_format"], op_meta["table_commit"]) == ("delta", second.table_commit.id)
    for reader in ("own", "polars"):
        table = read("delta", daily.dest.url, reader)
        assert table.num_rows == 1000, reader  # the steps job's day, alone
    assert pending_in_bucket(daily) == []
