"""What a table format declares of itself, for the registry (:mod:`.registry`).

A format is two modules: a light declaration (``<format>_plugin.py``: its name,
its folder at the destination, its job options and how people name them) that
imports nothing of the core but this module, and its implementation
(:class:`~zero_rename.core.tables.base.TableFormat`), imported with its library
only when a job names the format. The job options (:mod:`zero_rename.core.data.options`)
take every format's options from the registry, so adding a format touches no
module outside ``core/tables``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from zero_rename.core.data.options import JobOptions
    from zero_rename.core.data.records import JobContext
    from zero_rename.core.tables.base import TableFormat


@dataclass(frozen=True)
class FormatOption:
    """One job option of a format, as people name it: the option's description
    (docs, Airflow's configuration), an example, and the command line's flag."""

    description: str
    example: str
    metavar: str
    flag_help: str

    def flag(self, name: str) -> str:
        """The command line's flag for the option ``name``: ``--iceberg-catalog``."""
        return "--" + name.replace("_", "-")


class NoOptions(BaseModel):
    """A format without job options of its own."""


Options = TypeVar("Options", bound=BaseModel)


@dataclass(frozen=True)
class FormatPlugin(Generic[Options]):
    """A table format: its name (the ``table_format`` option's value) and its name for
    people, its folder at
    the destination (where its metadata is written), its job options (a pydantic
    model whose fields join :class:`~zero_rename.core.data.options.JobOptions`,
    each named in ``option_help``), the word for one of its commits, and where
    its implementation is (``module:Class``, imported on first use)."""

    name: str
    label: str  # for people: "Iceberg"
    folder: str
    implementation: str
    commit_word: str
    options: type[Options]
    option_help: Mapping[str, FormatOption] = field(default_factory=dict)
    # The job's table, for people (``zero-rename jobs show``): the format's options.
    describe: Callable[[Any], str] | None = None

    def load(self) -> Callable[[JobContext, JobOptions], TableFormat]:
        """The format's class; its library is imported here, on first use."""
        module, name = self.implementation.split(":")
        cls: Callable[[JobContext, JobOptions], TableFormat] = getattr(
            importlib.import_module(module), name
        )
        return cls

    def open(self, ctx: JobContext, options: JobOptions) -> TableFormat:
        """The format at the job's destination."""
        return self.load()(ctx, options)

    def described(self, options: BaseModel) -> str:
        return self.describe(options) if self.describe is not None else self.name

    def options_of(self, job: BaseModel) -> Options:
        """The format's own options, typed, out of a job's options."""
        return self.options.model_validate({k: getattr(job, k) for k in self.options.model_fields})
