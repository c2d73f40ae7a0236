"""Each method's Spark session, configured as its own documentation recommends.

One session per process: the jars a session loads are fixed when its JVM
starts, so every method runs in a driver process of its own
(:mod:`bench.peers.driver`).

- ``fileoutput-v1`` / ``-v2``: Spark's default for ``s3a://`` paths, Hadoop's
  ``FileOutputCommitter`` (``mapreduce.fileoutputcommitter.algorithm.version``),
  which renames: on S3A a copy and a delete per file.
- ``s3a-magic``, ``s3a-directory``, ``s3a-partitioned``: Hadoop's S3A
  committers bound into Spark by ``spark-hadoop-cloud``
  (``PathOutputCommitProtocol``, ``BindingParquetOutputCommitter``,
  ``fs.s3a.committer.name``).
- ``manifest``: Hadoop's manifest committer through its factory. It refuses
  the ``s3a`` scheme by name ("This committer does not work with the
  filesystem of type s3a"), so it is run as users who want it on S3 have to:
  ``s3://`` mapped to S3A (``fs.s3.impl``), against its authors' advice.
- ``iceberg-spark``: Spark's Iceberg writer (``writeTo``), Iceberg's JDBC
  catalog on SQLite, the same table PyIceberg's SQL catalog uses, and
  ``S3FileIO``.
- ``delta-spark``: Spark's Delta writer (``DeltaSparkSessionExtension``) over
  S3A, Delta's default log store for S3 (one driver at a time).
- ``zero-rename-*``: the ``zero-rename`` format, with the magic or staging
  committer, publishing to no format, Iceberg (PyIceberg's SQL catalog on the
  same SQLite file) or Delta.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from bench.peers import jars

S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
CLOUD_PROTOCOL = {
    "spark.sql.sources.commitProtocolClass": (
        "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
    ),
    "spark.sql.parquet.output.committer.class": (
        "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter"
    ),
}
MANIFEST_FACTORY = (
    "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitterFactory"
)
# The Spark catalog through which the JVM sees Iceberg tables: the name PyIceberg's
# SQL catalog files them under, so that both sides read one catalog's rows.
ICEBERG_CATALOG = "zero_rename"


@dataclass(frozen=True)
class Store:
    """The S3 endpoint every method of a run writes to, and where the Iceberg
    catalog's SQLite file lives."""

    endpoint_url: str
    access_key: str
    secret_key: str
    bucket: str
    catalog_db: str  # the SQLite file of the Iceberg catalog both sides share
    region: str = "us-east-1"


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    family: str  # "committer" (plain files), "table" (a format's own writer), "zero-rename"
    packages: tuple[str, ...] = ()
    settings: dict[str, str] = field(default_factory=dict)
    scheme: str = "s3a"  # the scheme of the destination's URL

    @property
    def zero_rename(self) -> bool:
        return self.family == "zero-rename"

    @property
    def committer(self) -> str:
        """zero-rename's committer, for its methods."""
        return "staging" if "staging" in self.name else "magic"

    @property
    def table_format(self) -> str:
        for fmt in ("iceberg", "delta"):
            if self.name.endswith(fmt):
                return fmt
        return "none"


def _committer(name: str) -> dict[str, str]:
    return {
        **CLOUD_PROTOCOL,
        "spark.hadoop.fs.s3a.committer.name": name,
        "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
    }


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "fileoutput-v1",
            "FileOutputCommitter v1 (rename at task and job commit)",
            "committer",
            jars.S3A,
            {"spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "1"},
        ),
        Method(
            "fileoutput-v2",
            "FileOutputCommitter v2 (rename at task commit)",
            "committer",
            jars.S3A,
            {"spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version": "2"},
        ),
        Method(
            "s3a-magic",
            "S3A magic committer",
            "committer",
            jars.S3A_COMMITTERS,
            _committer("magic"),
        ),
        Method(
            "s3a-directory",
            "S3A staging committer, directory",
            "committer",
            jars.S3A_COMMITTERS,
            _committer("directory"),
        ),
        Method(
            "s3a-partitioned",
            "S3A staging committer, partitioned",
            "committer",
            jars.S3A_COMMITTERS,
            _committer("partitioned"),
        ),
        Method(
            "manifest",
            "manifest committer (s3:// mapped to S3A: it refuses s3a://)",
            "committer",
            jars.S3A_COMMITTERS,
            {
                **CLOUD_PROTOCOL,
                "spark.hadoop.fs.s3.impl": S3A_CLASS,
                "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3": MANIFEST_FACTORY,
            },
            scheme="s3",
        ),
        Method("iceberg-spark", "Spark's Iceberg writer", "table", jars.ICEBERG),
        Method(
            "delta-spark",
            "Spark's Delta writer",
            "table",
            jars.DELTA_LAKE,
            {
                "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                "spark.sql.catalog.spark_catalog": (
                    "org.apache.spark.sql.delta.catalog.DeltaCatalog"
                ),
            },
        ),
        Method("zero-rename-magic", "zero-rename, magic committer", "zero-rename", scheme="s3"),
        Method("zero-rename-staging", "zero-rename, staging committer", "zero-rename", scheme="s3"),
        Method(
            "zero-rename-iceberg",
            "zero-rename, magic, published to Iceberg",
            "zero-rename",
            scheme="s3",
        ),
        Method(
            "zero-rename-delta",
            "zero-rename, magic, published to Delta",
            "zero-rename",
            scheme="s3",
        ),
    )
}


def s3a_settings(store: Store) -> dict[str, str]:
    """S3A against the run's endpoint: path style, plain HTTP, static keys."""
    prefix = "spark.hadoop.fs.s3a."
    return {
        prefix + "endpoint": store.endpoint_url,
        prefix + "endpoint.region": store.region,
        prefix + "path.style.access": "true",
        prefix + "connection.ssl.enabled": "false",
        prefix + "access.key": store.access_key,
        prefix + "secret.key": store.secret_key,
    }


def iceberg_settings(store: Store) -> dict[str, str]:
    """Spark's Iceberg catalog on the run's SQLite file, with S3FileIO."""
    prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    return {
        "spark.sql.extensions": (
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
        ),
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        prefix + ".type": "jdbc",
        prefix + ".uri": f"jdbc:sqlite:{store.catalog_db}",
        # Iceberg's JDBC catalog refuses to look up a name in a database of the
        # first schema (PyIceberg's) unless it may add its view column (V1);
        # PyIceberg ignores that column, and its rows (NULL there) stay tables.
        prefix + ".jdbc.schema-version": "V1",
        prefix + ".warehouse": f"s3://{store.bucket}/iceberg-warehouse",
        prefix + ".io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        prefix + ".s3.endpoint": store.endpoint_url,
        prefix + ".s3.path-style-access": "true",
        prefix + ".s3.access-key-id": store.access_key,
        prefix + ".s3.secret-access-key": store.secret_key,
        prefix + ".client.region": store.region,
    }


def session_settings(method: Method, store: Store) -> dict[str, str]:
    """Everything the method's session is configured with, jars included."""
    settings = dict(jars.spark_conf(method.packages))
    if method.family == "committer" or method.name == "delta-spark":
        settings.update(s3a_settings(store))
    if method.name == "iceberg-spark":
        settings.update(iceberg_settings(store))
    settings.update(method.settings)
    return settings


def start_session(
    method: Method,
    store: Store,
    *,
    master: str = "local[2]",
    extra: dict[str, str] | None = None,
) -> Any:
    """A local session for ``method``; its Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # zero-rename's side (and PyIceberg inside it) finds the store and the
    # catalog's home in the environment, as its users' jobs do.
    os.environ["AWS_ACCESS_KEY_ID"] = store.access_key
    os.environ["AWS_SECRET_ACCESS_KEY"] = store.secret_key
    os.environ["AWS_REGION"] = store.region
    os.environ["AWS_ENDPOINT_URL_S3"] = store.endpoint_url
    os.environ["ZERO_RENAME_ICEBERG_HOME"] = os.path.dirname(store.catalog_db)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(f"peers {method.name}")
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        **session_settings(method, store),
        **(extra or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if method.zero_rename:
        from zero_rename.spark import register

        register(spark)
    return spark
