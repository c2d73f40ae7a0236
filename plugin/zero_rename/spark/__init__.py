"""Spark 4 Python Data Source for zero-rename: the ``zero-rename`` format.

    from zero_rename.spark import register
    register(spark)
    (df.write.format("zero-rename").mode("overwrite")
       .option("partition_by", "dt").save("s3://bucket/table"))

Options are listed in :mod:`zero_rename.spark.options`.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, ParamSpec, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

__all__ = [
    "FORMAT",
    "WORKER_ENVIRONMENT",
    "register",
    "register_source",
    "worker_imports",
    "worker_step",
]

P = ParamSpec("P")
R = TypeVar("R")

# Here, where importing it loads nothing else: Spark's lookup of installed data
# sources imports the format's class (:mod:`.source`), which needs the name only.
FORMAT = "zero-rename"

# What the format's Python workers (job setup, the tasks, job commit) are given
# beyond the driver's environment. They run the format's code alone, whose
# models use none of pydantic's plugins; looking the plugins up reads the
# metadata of every distribution on the path, and Spark puts its spark-core
# jar (thousands of entries) on that path: about 60 ms of CPU in every fresh
# worker, twice on a write's critical path (docs/benchmarks.md).
WORKER_ENVIRONMENT = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}


@contextmanager
def _worker_environment() -> Iterator[None]:
    """:data:`WORKER_ENVIRONMENT`'s variables, where unset, for the block alone.

    Where the format was not registered by :func:`register` (Spark's own lookup
    of ``pyspark_zero_rename``, a Spark Connect server's workers) its workers
    run without the variables, and the first model built would look pydantic's
    plugins up. Set only for the format's own code, and then removed, they
    leave the worker's environment as Spark gave it: pydantic caches no lookup
    while they are set, so a model built later in the process (a UDF's, in a
    reused task worker) still gets the plugins installed.
    """
    added = [key for key in WORKER_ENVIRONMENT if key not in os.environ]
    os.environ.update({key: WORKER_ENVIRONMENT[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextmanager
def worker_imports() -> Iterator[None]:
    """The format's worker modules import the committer inside this: with
    :data:`WORKER_ENVIRONMENT`'s variables (:func:`_worker_environment`) and
    without the cyclic garbage collector.

    The import makes some 70,000 objects that live as long as the process and
    almost no garbage (about 300 unreachable objects), yet the collector ran
    60 passes over them while they were made: 13 to 19 ms of a fresh job setup
    worker's import, on the write's critical path (docs/benchmarks.md). In
    Spark's Python workers (``SPARK_PYTHON_RUNTIME``) what the import leaves is
    then frozen (:func:`gc.freeze`), so that the step's own collections do not
    walk it again; a process of the user's keeps its collector as it was.
    """
    collecting = gc.isenabled()  # nested, or paused by the caller: left paused
    gc.disable()
    try:
        with _worker_environment():
            yield
    finally:
        if collecting:
            if os.environ.get("SPARK_PYTHON_RUNTIME") == "PYTHON_WORKER":
                gc.freeze()
            gc.enable()


def worker_step(method: Callable[P, R]) -> Callable[P, R]:
    """One of the format's calls from Spark (``writer()``, ``write()``, ``commit()``,
    ``abort()``, a read's planning), run with :data:`WORKER_ENVIRONMENT`'s variables
    (:func:`_worker_environment`): the committer's models are built on their first
    use (:mod:`zero_rename.frozen`), inside these calls rather than at import."""

    @functools.wraps(method)
    def step(*args: P.args, **kwargs: P.kwargs) -> R:
        with _worker_environment():
            return method(*args, **kwargs)

    return step


def register(spark: SparkSession) -> None:
    """Register the ``zero-rename`` format with a SparkSession."""
    # Imported here: the option parser is usable without pyspark installed.
    from zero_rename.spark.source import ZeroRenameDataSource

    register_source(spark, ZeroRenameDataSource)


def register_source(spark: SparkSession, source: type[DataSource]) -> None:
    """Register ``source`` (the format, or a subclass of it) so that its Python
    workers run with :data:`WORKER_ENVIRONMENT`.

    Spark gives a registered data source's workers the SparkContext's
    environment as it was at registration, so it is set only around it. A
    variable the driver's environment sets already is left as it is; a Spark
    Connect session's registration carries no environment, and neither does
    the registration Spark makes itself from the installed ``pyspark_*`` module.
    """
    from pyspark.sql.session import SparkSession as ClassicSession

    if not isinstance(spark, ClassicSession):
        spark.dataSource.register(source)
        return
    environment = spark.sparkContext.environment
    added = {
        key: value
        for key, value in WORKER_ENVIRONMENT.items()
        if key not in environment and key not in os.environ
    }
    environment.update(added)
    try:
        spark.dataSource.register(source)
    finally:
        for key in added:
            environment.pop(key, None)
