"""``format("zero-rename")`` in every Spark session, without ``register(spark)``.

Spark 4 registers the Python data sources it finds by module name: on the
first data source call of a session it imports every installed top-level
module named ``pyspark_*`` and registers the ``DefaultSource`` it exposes
(``pyspark/sql/worker/lookup_data_sources.py``). So wherever this package is
installed (a driver, ``spark-submit``, a cluster's Python), the format is
there. ``zero_rename.spark.register`` stays for explicit registration.
"""

from zero_rename.spark.source import ZeroRenameDataSource as DefaultSource

__all__ = ["DefaultSource"]
