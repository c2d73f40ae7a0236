"""Spark 4 Python Data Source for zero-rename: the ``zero-rename`` format.

    from zero_rename.spark import register
    register(spark)
    (df.write.format("zero-rename").mode("overwrite")
       .option("partition_by", "dt").save("s3://bucket/table"))

Options are listed in :mod:`zero_rename.spark.options`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

__all__ = ["FORMAT", "WORKER_ENVIRONMENT", "register", "register_source", "worker_imports"]

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
def worker_imports() -> Iterator[None]:
    """:data:`WORKER_ENVIRONMENT`'s variables, where unset, while the format's
    worker modules import the committer (and build its models).

    Where the format was not registered by :func:`register` (Spark's own lookup
    of ``pyspark_zero_rename``, a Spark Connect server's workers) its workers
    run without them, and the first model built would look pydantic's plugins
    up. Set only for the import, and then removed, they leave the worker's
    environment as Spark gave it: pydantic caches no lookup while they are set,
    so a model built later in the process (a UDF's, in a reused task worker)
    still gets the plugins installed.
    """
    added = [key for key in WORKER_ENVIRONMENT if key not in os.environ]
    os.environ.update({key: WORKER_ENVIRONMENT[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


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
