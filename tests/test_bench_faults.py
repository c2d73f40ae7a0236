"""The fault table's judgements (bench/peers/faults.py), on rows made up here:
how a reader's rows are named, what counts as a leftover, which outcomes of
two concurrent jobs some serial order explains. The scenarios themselves need
the peers' Spark and run with `make bench-peers-faults`."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.peers.fault_driver import one_line
from bench.peers.fault_state import Observed, describe, expected, is_listed, leftover_kind
from bench.peers.faults import _cell, serial_verdict
from bench.peers.sessions import METHODS

pytestmark = pytest.mark.unit

OLD, NEW, ADDED = expected(1, 8), expected(2, 8), expected(3, 8)


def test_describe_names_a_state_or_counts_each_write() -> None:
    states = {"old": OLD, "new": NEW}
    assert describe(NEW, states) == "new"
    assert describe(Counter(), states) == "nothing"
    assert describe(None, states) == "-"
    half = Counter({k: n for k, n in NEW.items() if k[1] < 4})
    assert describe(OLD + half, states) == "old 8/8 + new 4/8"
    assert describe(NEW + half, states) == "new 8/8 (+4 duplicates)"


def test_listing_rule_and_leftovers() -> None:
    assert is_listed("dt=2024-01-01/part-0.parquet")
    assert not is_listed("_temporary/0/part-0.parquet")
    assert not is_listed(".spark-staging-x/dt=1/part-0.parquet")
    assert not is_listed("dt=1/part-0.parquet.pending")
    magic, zr = METHODS["s3a-magic"], METHODS["zero-rename-magic"]
    assert leftover_kind("__magic_job-1/x.pendingset", magic) == "__magic/"
    assert leftover_kind("_SUCCESS", magic) is None
    assert leftover_kind("dt=1/part-0.parquet", magic) is None
    committed, committing = {"a": "committed"}, {"a": "committing"}
    assert leftover_kind("_zero_rename/jobs/a/job.json", zr, committing) is None
    assert leftover_kind("_zero_rename/jobs/a/plan-1.json", zr, committed) is None
    assert leftover_kind("_zero_rename/jobs/a/tasks/t.json", zr, committed) == (
        "_zero_rename/ temporary objects"
    )
    assert leftover_kind("_zero_rename/jobs/a/plan-1.json", zr, committing) == (
        "_zero_rename/ objects of a job left committing"
    )
    assert (
        leftover_kind("_iceberg/metadata/0.metadata.json", METHODS["zero-rename-iceberg"]) is None
    )


def _observed(seen: Counter[tuple[int, int]], commits: int | None) -> Observed:
    return Observed(
        seen, seen if commits is not None else None, 0, None, [], 0, Counter(), commits=commits
    )


def test_serial_verdict() -> None:
    states = {"old": OLD, "new": NEW, "new + appended": NEW + ADDED, "old + appended": OLD + ADDED}
    assert (
        serial_verdict(_observed(NEW, None), states, True, True) == "serial: append, then replace"
    )
    assert serial_verdict(_observed(NEW, None), states, True, False) == "serial: the replace alone"
    # Both said committed, one commit in the table: one was lost.
    lost = serial_verdict(_observed(OLD + ADDED, 2), states, True, True)
    assert lost.startswith("no serial order")
    partial = Counter({k: n for k, n in ADDED.items() if k[1] < 2})
    assert serial_verdict(_observed(NEW + partial, None), states, True, False).startswith(
        "no serial order: new 8/8 + appended 2/8"
    )


def test_one_line_and_cells() -> None:
    python = Exception(
        "[PYTHON_DATA_SOURCE_ERROR] Failed\nTraceback (most recent call last):\n"
        "zero_rename.errors.PartitionClaimConflict: job a holds dt=1"
    )
    assert one_line(python) == "PartitionClaimConflict: job a holds dt=1"
    java = Exception(
        "An error occurred while calling o75.save.\n: org.apache.spark.SparkException: Job "
        "aborted.\n\tat x\nCaused by: java.io.IOException: Failed to rename s3a://b/x"
    )
    assert one_line(java) == "IOException: Failed to rename s3a://b/x"
    job = "4f9d9098-e1d1-4d6f-8465-446f136513e2"
    assert _cell(f"job {job} | x") == "job 4f9d9098 \\| x"
