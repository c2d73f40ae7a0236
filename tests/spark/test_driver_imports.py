"""What the format's fresh Python workers import: a write's driver-side steps,
a write task and a read.

Spark runs a Python data source's job setup and its job commit (or abort) in
Python workers it forks on the driver for each write
(``pyspark/sql/worker/write_into_data_source.py``, then
``pyspark/sql/worker/commit_data_source_write.py``): a fresh worker imports
Spark's worker module, unpickles the data source class (importing its module)
and calls ``writer()``; the other unpickles the writer and the tasks' commit
messages and calls ``commit()`` or ``abort()``. Every module our code loads
there is paid for on every write, so the worker's steps are played here in
fresh interpreters, with the real format against the real S3 server, and
what our code loaded is compared with what it may not load: pyarrow and the
libraries it brings, the table formats' libraries and the format's own
Parquet and reading code, which only the tasks (and a table format's
publish) need. Modules Spark's worker module loads itself are not ours. A
write task and a read's workers may load pyarrow, but not pandas, which
pyarrow loads on some calls.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark import cloudpickle
from pyspark.sql.types import LongType, StringType, StructField, StructType

from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig, environment_endpoint
from zero_rename.core.s3.light import light_client_unsupported
from zero_rename.read import read_table
from zero_rename.spark.datasource import ZeroRenameDataSource

pytestmark = pytest.mark.s3

# Top-level packages, and modules of the format, that only the tasks may load;
# nor boto3 (its transfer manager: the store needs botocore's client alone) or
# rich (the command line's).
HEAVY = (
    *("pyarrow", "pandas", "numpy", "pyiceberg", "deltalake", "polars"),
    *("boto3", "s3transfer", "rich"),
)
TASK_ONLY = ("zero_rename.spark.parquet", "zero_rename.spark.reader", "zero_rename.read")

# Spark's driver-side worker, up to the moment it hands the writer back: it
# imports its module, unpickles the data source class Spark sent (cloudpickle,
# read with pickle), builds the data source from the options and calls
# writer(). (After that it imports pyarrow itself, for the tasks' function.)
SETUP = """
import json, pickle, sys
import pyspark.sql.worker.write_into_data_source
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import _parse_datatype_json_string
from pyspark.worker_util import pickleSer

spark_loaded = set(sys.modules)
given = json.load(sys.stdin)
source_class = pickleSer.loads(bytes.fromhex(given["class"]))
schema = _parse_datatype_json_string(given["schema"])
writers = [
    source_class(options=CaseInsensitiveDict(options)).writer(schema, False)
    for options in given["writes"]
]
ours = sorted(set(sys.modules) - spark_loaded)
print(json.dumps({"ours": ours, "writers": [pickleSer.dumps(w).hex() for w in writers]}))
"""

# The commit worker: the writer and the messages unpickled, then commit() for
# the first writer and abort() for the second.
COMMIT = """
import json, sys
import pyspark.sql.worker.commit_data_source_write
from pyspark.worker_util import pickleSer

spark_loaded = set(sys.modules)
given = json.load(sys.stdin)
for action, writer, messages in given["calls"]:
    writer = pickleSer.loads(bytes.fromhex(writer))
    messages = [pickleSer.loads(bytes.fromhex(m)) for m in messages]
    getattr(writer, action)(messages)
print(json.dumps({"ours": sorted(set(sys.modules) - spark_loaded)}))
"""


def run_worker(code: str, given: dict[str, object]) -> dict[str, list[str]]:
    ran = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    answer: dict[str, list[str]] = json.loads(ran.stdout.splitlines()[-1])
    return answer


def too_heavy(modules: list[str]) -> list[str]:
    return [
        m
        for m in modules
        if m.split(".")[0] in HEAVY or any(m == t or m.startswith(t + ".") for t in TASK_ONLY)
    ]


# botocore's client machinery, and what the light client's own signer, proxy
# check and connections spare a fresh worker: its signer, credential providers
# and utils, and urllib3 (about 30 ms of a fresh worker's import).
BOTOCORE_CLIENT = (
    "botocore.client",
    "botocore.session",
    "botocore.waiter",
    "botocore.auth",
    "botocore.credentials",
    "botocore.utils",
    "urllib3",
)


def botocore_client(modules: list[str]) -> list[str]:
    return [m for m in modules if m in BOTOCORE_CLIENT]


def test_job_setup_commit_and_abort_load_no_arrow_or_parquet_code(
    dest: str, committer: Committer, tmp_path: Path
) -> None:
    schema = StructType([StructField("id", LongType()), StructField("dt", StringType())])
    writes = [
        {"path": dest, "partition_by": "dt"},
        {"path": f"{dest}-aborted", "partition_by": "dt"},
    ]
    setup = run_worker(
        SETUP,
        {
            "class": cloudpickle.dumps(ZeroRenameDataSource).hex(),
            "schema": schema.json(),
            "writes": writes,
        },
    )
    assert "zero_rename.spark.datasource" in setup["ours"]  # the format did load
    assert too_heavy(setup["ours"]) == []
    # Nor botocore's client machinery, where the light client sends as it would.
    light = light_client_unsupported(StoreConfig(endpoint_url=environment_endpoint())) is None
    assert not light or botocore_client(setup["ours"]) == []

    # The tasks, here: two of them write a partition each.
    calls = []
    for action, blob in zip(("commit", "abort"), setup["writers"], strict=True):
        writer = pickle.loads(bytes.fromhex(blob))
        messages = [
            writer.write_attempt(i, i, iter([pa.record_batch({"id": [i], "dt": [f"d{i}"]})]))
            for i in range(2)
        ]
        calls.append((action, blob, [pickle.dumps(m).hex() for m in messages]))
    commit = run_worker(COMMIT, {"calls": calls})
    assert "zero_rename.core.protocol.commit" in commit["ours"]
    assert too_heavy(commit["ours"]) == []
    assert not light or botocore_client(commit["ours"]) == []

    committed, aborted = (Committer(w["path"]).jobs() for w in writes)
    assert [j.state for j in committed] == ["committed"]
    assert [j.state for j in aborted] == ["aborted"]
    assert committer.read_success() is not None


# Spark's lookup of installed data sources, on a session's first data source call
# whatever its format: every pyspark_* module imported, its DefaultSource pickled.
LOOKUP = """
import json, sys
import pyspark.sql.worker.lookup_data_sources
from pyspark.worker_util import pickleSer

spark_loaded = set(sys.modules)
import pyspark_zero_rename
pickleSer.dumps(pyspark_zero_rename.DefaultSource)
print(json.dumps({"ours": sorted(set(sys.modules) - spark_loaded)}))
"""


def test_sparks_lookup_of_installed_sources_loads_only_the_formats_class() -> None:
    """Every application's first data source call pays this lookup, zero-rename's
    or not: no committer, pydantic, botocore or pyarrow (about 0.3 s when it
    imported the committer)."""
    ours = run_worker(LOOKUP, {})["ours"]
    assert "zero_rename.spark.source" in ours
    assert [m for m in ours if m.split(".")[0] not in ("zero_rename", "pyspark_zero_rename")] == []
    assert sorted(m for m in ours if m.startswith("zero_rename")) == [
        "zero_rename",
        "zero_rename.spark",
        "zero_rename.spark.source",
    ]


def test_the_check_sees_a_heavy_import() -> None:
    """The same comparison, given a worker that does import pyarrow, finds it."""
    code = "import sys; before = set(sys.modules); import pyarrow.parquet\n"
    code += "import json; print(json.dumps({'ours': sorted(set(sys.modules) - before)}))"
    found = too_heavy(run_worker(code, {})["ours"])
    assert "pyarrow" in found and "pyarrow.parquet" in found


# A write task in Spark's worker: the batches arrive as Arrow IPC; the writer
# was pickled on the driver.
TASK = """
import json, pickle, sys
import pyarrow as pa
import pyspark.worker

spark_loaded = set(sys.modules)
given = json.load(sys.stdin)
writer = pickle.loads(bytes.fromhex(given["writer"]))
batches = list(pa.ipc.open_stream(bytes.fromhex(given["batches"])))
message = pickle.dumps(writer.write_attempt(0, 0, iter(batches))).hex()
print(json.dumps({"ours": sorted(set(sys.modules) - spark_loaded), "message": message}))
"""


def test_a_task_writing_several_partitions_loads_no_pandas(
    dest: str, committer: Committer, store_config: StoreConfig
) -> None:
    """pyarrow imports pandas, when installed, for any array or scalar built from
    Python values and for its group_by: about 0.4 s of CPU in each fresh task
    worker whose batch held rows of several partitions."""
    schema = StructType([StructField("id", LongType()), StructField("dt", StringType())])
    writer = ZeroRenameDataSource(options={"path": dest, "partition_by": "dt"}).writer(
        schema, False
    )
    batch = pa.record_batch({"id": list(range(6)), "dt": ["a", "b", "a", None, "b", "a"]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as stream:
        stream.write_batch(batch)
    task = run_worker(
        TASK, {"writer": pickle.dumps(writer).hex(), "batches": sink.getvalue().to_pybytes().hex()}
    )
    assert "zero_rename.spark.parquet" in task["ours"]  # the task did write
    assert [m for m in task["ours"] if m.split(".")[0] == "pandas"] == []

    writer.commit([pickle.loads(bytes.fromhex(task["message"]))])  # type: ignore[arg-type]
    table = read_table(dest, store_config=store_config).sort_by("id")
    assert table.to_pydict() == {"id": [0, 1, 2, 3, 4, 5], "dt": ["a", "b", "a", None, "b", "a"]}


# A read's worker: the reader module, and Arrow's S3 client for the store (its
# credentials a whole static set in the environment, no AWS config file).
READ = """
import json, os, sys
import pyspark.worker

spark_loaded = set(sys.modules)
import zero_rename.spark.reader
from zero_rename.core import StoreConfig
from zero_rename.read import filesystem

os.environ.update(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="example-secret")
os.environ["AWS_CONFIG_FILE"] = os.devnull + "-none"
fs = filesystem(StoreConfig(endpoint_url="http://127.0.0.1:9"))
print(json.dumps({"ours": sorted(set(sys.modules) - spark_loaded), "region": fs.region}))
"""


def test_a_reads_workers_load_no_dataset_pandas_or_botocore_session() -> None:
    """A read's schema and planning steps, and each of its tasks, load the reader
    module in a fresh worker and make Arrow's S3 client: pyarrow.dataset
    (read_table's), with the pandas it loads, was about 0.4 s of CPU of each, and
    botocore's session, for credentials the environment holds, about 0.2 s."""
    read = run_worker(READ, {})
    assert "pyarrow.parquet" in read["ours"]  # what the tasks read with
    assert [m for m in read["ours"] if m.split(".")[0] == "pandas" or m == "pyarrow.dataset"] == []
    assert "botocore.session" not in read["ours"]
    assert read["region"] == "us-east-1"
