"""The demos behind ``make demo``, ``make demo-core`` and ``make demo-dagster``.

They run from a clone of the repository (they use its ``dags/`` and
``dagster_defs/``) and are not part of the installed package.
"""
