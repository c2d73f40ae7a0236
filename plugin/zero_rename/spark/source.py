"""The ``zero-rename`` data source class: what Spark loads before it knows the work.

Spark imports this class where no write or read runs: the first time an
application names a Python data source or registers one, whichever, its lookup
worker imports every installed ``pyspark_*`` module (``pyspark_zero_rename``
exposes this class); a driver imports it to register the format; each of a
write's or a read's Python workers unpickles it first. So this module loads
pyspark's data source base alone, and each method imports the code of its own
work: a write's (:mod:`.datasource`: the committer, pydantic, the light S3
client) or a read's (:mod:`.reader`: pyarrow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter

from zero_rename.spark import FORMAT, worker_step

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from zero_rename.spark.reader import ZeroRenameReader


class ZeroRenameDataSource(DataSource):
    """``df.write.format("zero-rename").mode("append" | "overwrite").save("s3://b/t")``,
    and ``spark.read.format("zero-rename").load("s3://b/t")`` (:mod:`.reader`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    @worker_step
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from zero_rename.spark.datasource import new_writer

        return new_writer(dict(self.options), schema, overwrite)

    @worker_step
    def schema(self) -> StructType:
        from zero_rename.spark.reader import infer_schema, parse_reader_options, take_snapshot

        config = parse_reader_options(dict(self.options))
        return infer_schema(config, take_snapshot(config))

    @worker_step
    def reader(self, schema: StructType) -> ZeroRenameReader:
        from zero_rename.spark.reader import new_reader, parse_reader_options

        return new_reader(parse_reader_options(dict(self.options)), schema)
