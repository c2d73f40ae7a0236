"""Spark 4 Python Data Source for zero-rename: the ``zero-rename`` format.

    from zero_rename.spark import register
    register(spark)
    (df.write.format("zero-rename").mode("overwrite")
       .option("partition_by", "dt").save("s3://bucket/table"))

Options are listed in :mod:`zero_rename.spark.options`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zero_rename.spark.options import FORMAT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``zero-rename`` format with a SparkSession."""
    # Imported here: the option parser is usable without pyspark installed.
    from zero_rename.spark.datasource import ZeroRenameDataSource

    spark.dataSource.register(ZeroRenameDataSource)
