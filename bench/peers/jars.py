"""Which jars each peer needs, and a cache they are resolved into at run time.

The versions are the newest that fit one Spark release together:

- Spark 4.2 has no ``spark-hadoop-cloud`` (the binding of Hadoop's committers,
  ``PathOutputCommitProtocol``) and no Iceberg runtime on Maven Central; 4.1.2
  has both, and Delta builds ``delta-spark_4.1``. So the peers run on 4.1.2
  (``requirements-peers.txt``), not on the suite's pinned 4.2.
- ``hadoop-aws`` must be the Hadoop that Spark ships (``hadoop-client-api``
  in pyspark's jars: 3.4.2 for Spark 4.1.2); it brings the AWS SDK v2 bundle
  (about 640 MB), which is why the cache is kept between runs.

Spark resolves them itself (``spark.jars.packages``, through Ivy), as its users
do, but from Maven Central alone: Spark's default chain also asks
repos.spark-packages.org for every artifact, which costs a failed lookup each
where that host is out of reach.
"""

from __future__ import annotations

import os
from pathlib import Path

SPARK_VERSION = "4.1.2"
SCALA = "2.13"
HADOOP_VERSION = "3.4.2"
ICEBERG_VERSION = "1.12.0"
DELTA_VERSION = "4.4.0"
SQLITE_JDBC_VERSION = "3.51.1.0"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
CACHE_VARIABLE = "ZERO_RENAME_JAR_CACHE"

HADOOP_AWS = f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}"
HADOOP_CLOUD = f"org.apache.spark:spark-hadoop-cloud_{SCALA}:{SPARK_VERSION}"
ICEBERG_RUNTIME = (
    f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_VERSION.rsplit('.', 1)[0]}_{SCALA}:"
    f"{ICEBERG_VERSION}"
)
ICEBERG_AWS = f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}"
SQLITE_JDBC = f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}"
DELTA = f"io.delta:delta-spark_{SPARK_VERSION.rsplit('.', 1)[0]}_{SCALA}:{DELTA_VERSION}"
# Not a peer: OpenLineage's Spark listener, which the Airflow tests run in the daily
# application on the suite's Spark 4.2 (tests/airflow/test_spark_lineage.py).
OPENLINEAGE_SPARK_VERSION = "1.53.0"
OPENLINEAGE_SPARK = f"io.openlineage:openlineage-spark_{SCALA}:{OPENLINEAGE_SPARK_VERSION}"

# spark-hadoop-cloud declares every cloud connector Hadoop has (Azure, GCS,
# Huawei, ...) as compile dependencies; only its two committer bindings and
# hadoop-aws are used here. Spark's own Hadoop client is on its class path.
HADOOP_CLOUD_EXCLUDES = (
    "com.google.cloud.bigdataoss:gcs-connector",
    "org.apache.hadoop:hadoop-azure",
    "org.apache.hadoop:hadoop-azure-datalake",
    "org.apache.hadoop:hadoop-huaweicloud",
    "org.apache.hadoop:hadoop-cloud-storage",
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
)

# Package sets, by what a session needs them for.
S3A = (HADOOP_AWS,)
S3A_COMMITTERS = (HADOOP_AWS, HADOOP_CLOUD)
ICEBERG = (ICEBERG_RUNTIME, ICEBERG_AWS, SQLITE_JDBC)
DELTA_LAKE = (HADOOP_AWS, DELTA)
EVERY = tuple(dict.fromkeys(S3A_COMMITTERS + ICEBERG + DELTA_LAKE))


def cache_dir() -> Path:
    """Where Ivy keeps what it resolved: ``$ZERO_RENAME_JAR_CACHE``, else
    ``~/.cache/zero-rename/jars``."""
    configured = os.environ.get(CACHE_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "zero-rename" / "jars"


def ivy_settings() -> Path:
    """An Ivy settings file naming Maven Central as the only repository, written
    into the cache (its content depends only on the cache's path)."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    path = root / "ivysettings.xml"
    text = (
        "<ivysettings>\n"
        '  <settings defaultResolver="central"/>\n'
        f'  <caches defaultCacheDir="{root / "cache"}"/>\n'
        "  <resolvers>\n"
        f'    <ibiblio name="central" m2compatible="true" root="{MAVEN_CENTRAL}"/>\n'
        "  </resolvers>\n"
        "</ivysettings>\n"
    )
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def spark_conf(packages: tuple[str, ...]) -> dict[str, str]:
    """The Spark settings that resolve ``packages`` through the cache."""
    if not packages:
        return {}
    conf = {
        "spark.jars.packages": ",".join(packages),
        "spark.jars.ivy": str(cache_dir()),
        "spark.jars.ivySettings": str(ivy_settings()),
    }
    if HADOOP_CLOUD in packages:
        conf["spark.jars.excludes"] = ",".join(HADOOP_CLOUD_EXCLUDES)
    return conf
