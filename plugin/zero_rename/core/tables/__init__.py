"""Table formats: each committed job published as one commit of Apache Iceberg or
Delta Lake, so that every engine reading the format sees the job whole or not at all.

``base`` holds what the protocol hands a format (:class:`~base.Publication`,
:class:`~base.TableFile`) and what it asks of one (:class:`~base.TableFormat`);
``iceberg`` (PyIceberg) and ``delta`` (delta-rs) implement it. Their libraries
are imported only when a job names the format: a job without one imports none
of them.
"""
