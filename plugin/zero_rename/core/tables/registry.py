"""The table formats a job may publish to, each adding itself by one line below.

Each line names a format's declaration (:class:`~.plugin.FormatPlugin`), a light
module that imports nothing of the core but :mod:`.plugin`; the format's library
is imported only when a job names it (:meth:`FormatPlugin.open`). The job
options, the layout's folders, the command line and Airflow's provider info read
the formats from here, so a new format (Hudi, say) is a module pair in
``core/tables`` and its line here.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, create_model

from zero_rename.core.tables.plugin import FormatOption, FormatPlugin

if TYPE_CHECKING:
    from zero_rename.core.data.options import JobOptions
    from zero_rename.core.data.records import JobContext
    from zero_rename.core.tables.base import TableFormat

# The formats' declarations, one line a format.
PLUGINS = (
    "zero_rename.core.tables.iceberg_plugin",
    "zero_rename.core.tables.delta_plugin",
)
# The table_format option's value for a job published to no format.
NONE = "none"


@cache
def table_formats() -> dict[str, FormatPlugin[Any]]:
    """Every format by name, in the order of :data:`PLUGINS`."""
    found: dict[str, FormatPlugin[Any]] = {}
    for module in PLUGINS:
        plugin: FormatPlugin[Any] = importlib.import_module(module).PLUGIN
        found[plugin.name] = plugin
    return found


def format_names() -> tuple[str, ...]:
    return tuple(table_formats())


def format_plugin(name: str) -> FormatPlugin[Any] | None:
    """The format named ``name``; None for ``none`` (or a name no format has)."""
    return table_formats().get(name)


@cache
def format_options() -> type[BaseModel]:
    """One model holding every format's job options (their fields and validators),
    which :class:`~zero_rename.core.data.options.JobOptions` extends."""
    bases = tuple(p.options for p in table_formats().values())
    model: type[BaseModel] = create_model("FormatOptions", __base__=bases or (BaseModel,))
    return model


def option_help() -> dict[str, tuple[FormatPlugin[Any], FormatOption]]:
    """Every format's job option by name, with its format."""
    return {name: (p, o) for p in table_formats().values() for name, o in p.option_help.items()}


def folders() -> dict[str, str]:
    """Each format's folder at the destination, by format."""
    return {name: p.folder for name, p in table_formats().items()}


def open_format(ctx: JobContext, options: JobOptions) -> TableFormat | None:
    """The table format the job's options name, at its destination; None for
    ``none``. Its library is imported here, on first use."""
    plugin = format_plugin(options.table_format)
    return plugin.open(ctx, options) if plugin is not None else None
