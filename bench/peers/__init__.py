"""The peers: Spark's own committers and table writers, run beside zero-rename.

Everything here runs in ``.venv-peers`` (``make peers-venv``): Spark 4.1, the
newest release for which every peer's jars are published (see :mod:`.jars`),
with zero-rename installed into it as well, so that every method of a
comparison runs on one Spark version. The jars are resolved at run time from
Maven Central into a local cache, never committed.
"""
