"""``_SUCCESS`` stays readable by Hadoop's own parser: the manifest committer's
``ManifestSuccessData``, from the Hadoop client jars pyspark ships, in the JVM."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import write_task
from zero_rename.core.committer import Committer
from zero_rename.core.data import shards

pytestmark = pytest.mark.spark

PARSER = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.ManifestSuccessData"


def _parse(spark: Any, text: str) -> Any:
    jvm_class = spark._jvm
    for part in PARSER.split("."):
        jvm_class = getattr(jvm_class, part)
    parsed = jvm_class.serializer().fromJson(text)
    parsed.validate()
    return parsed


def test_hadoop_parses_and_validates_success(
    spark: Any, committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards, "SHARD_SIZE", 2)  # a file list of several shards
    job = committer.setup_job({"partition_columns": "dt", "conflict_mode": "append"})
    for i in range(3):
        write_task(committer, job, f"{i:05d}", {"2024-01-01": b"a", "2024-01-02": b"b"})
    committer.commit_job(job.job_id)
    found = committer.store.get_object(committer.dest.bucket, committer.dest.success_key)
    assert found is not None
    parsed = _parse(spark, found[0].decode("utf-8"))
    assert parsed.getJobId() == job.job_id
    assert parsed.getSuccess()
    assert len(list(parsed.getFilenames())) == 6
    assert dict(parsed.getMetrics())["committer_files_committed"] == 6
