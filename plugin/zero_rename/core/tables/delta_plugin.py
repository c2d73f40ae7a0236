"""Delta Lake, as the registry knows it: no job options of its own (the table is
the destination); the format itself is :mod:`.delta`."""

from __future__ import annotations

from zero_rename.core.tables.plugin import FormatPlugin, NoOptions

PLUGIN = FormatPlugin(
    name="delta",
    label="Delta",
    folder="_delta_log",
    implementation="zero_rename.core.tables.delta:DeltaFormat",
    commit_word="version",
    options=NoOptions,
)
