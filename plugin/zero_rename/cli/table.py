"""``zero-rename table expire``: what a table format's retention lets go.

With a ``table_format``, a ``replace`` job removes the files it replaces from
the table but not from the store: readers of the table's older versions (time
travel, a long query) may still read them. The format's own retention deletes
them on request: Iceberg's snapshot expiry, Delta's vacuum. The format and its
table come from the newest job at DEST that was published to one, or from the
flags for a table whose jobs are gone.
"""

from __future__ import annotations

import argparse

from zero_rename.cli.arguments import DEST_HELP, Subcommands, command, command_group, duration_arg
from zero_rename.cli.context import Context
from zero_rename.cli.durations import format_span
from zero_rename.cli.exits import NotFound
from zero_rename.cli.output import Output, Result, Steps
from zero_rename.core import Committer, JobOptions, parse_options, table_formats
from zero_rename.errors import ConfigError


def _format_flags() -> dict[str, tuple[str, str, str]]:
    """Each format's job option as a flag: option -> (format, flag, its help)."""
    return {
        name: (plugin.name, option.flag(name), option.flag_help)
        for plugin in table_formats().values()
        for name, option in plugin.option_help.items()
    }


def _flags_of(table_format: str) -> str:
    """``--iceberg-catalog and --iceberg-table``: the flags of one format's options."""
    return " and ".join(f for fmt, f, _ in _format_flags().values() if fmt == table_format)


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    commands = command_group(groups, "table", "the table format's retention: expire")
    expire = command(
        commands,
        "expire",
        common,
        run_expire,
        dest=DEST_HELP,
        help="delete what no table version younger than --older-than reads",
        description="Expire what the table format's retention allows: Iceberg snapshots "
        "older than --older-than (and the files only they read), Delta's vacuum of the "
        "files removed from the table before then: the files replace jobs removed from "
        "the table. The format and table are those of the newest job at DEST published "
        f"to one; --format (and {_per_format_flags()}) name them for a table without "
        "such a job.",
    )
    expire.add_argument(
        "--older-than",
        metavar="AGE",
        type=duration_arg,
        required=True,
        help="keep every version younger than this, and the files they read (e.g. 7d)",
    )
    expire.add_argument(
        "--format",
        choices=tuple(table_formats()),
        default=None,
        help="the table format (default: the jobs')",
    )
    expire.add_argument(
        "--dry-run",
        action="store_true",
        help="list the files it would delete; expire and delete nothing",
    )
    for plugin in table_formats().values():
        for name, option in plugin.option_help.items():
            expire.add_argument(
                option.flag(name), metavar=option.metavar, default=None, help=option.flag_help
            )


def _per_format_flags() -> str:
    """``for Iceberg --iceberg-catalog, --iceberg-table``, for every format with options."""
    return "; ".join(
        f"for {plugin.label} " + ", ".join(o.flag(n) for n, o in plugin.option_help.items())
        for plugin in table_formats().values()
        if plugin.option_help
    )


def run_expire(ctx: Context, args: argparse.Namespace) -> Result:
    committer = ctx.committer(args.dest)
    with ctx.out.steps("table expire") as step:
        options = _table_options(committer, args, step)
        if args.dry_run:
            step(f"reading what the {options.table_format} table's retention would delete")
            table, files = committer.expirable(options, args.older_than)
            deleted = 0
        else:
            # The format's own retention: snapshots, manifests and files, read and deleted.
            step(f"expiring the {options.table_format} table's old versions")
            table, deleted = committer.expire_table(options, args.older_than)
            files = []
    age = format_span(args.older_than.total_seconds())
    data = {
        "destination": committer.dest.url,
        "format": options.table_format,
        "table": table,
        "older_than_seconds": int(args.older_than.total_seconds()),
        "dry_run": args.dry_run,
        "deleted_files": deleted,
        **({"would_delete": files} if args.dry_run else {}),
    }
    if args.dry_run:
        return Result(
            data, lambda out: _render_dry_run(out, options.table_format, table, age, files)
        )
    return Result(
        data,
        lambda out: out.say(
            f"expired the {options.table_format} table {table}: {deleted} file(s) no version "
            f"younger than {age} reads were deleted"
        ),
    )


def _render_dry_run(out: Output, table_format: str, table: str, age: str, files: list[str]) -> None:
    out.say(
        f"dry run: expiring the {table_format} table {table} would delete {len(files)} "
        f"file(s) no version younger than {age} reads; nothing was changed"
    )
    for path in files:
        out.say(f"  {path}")


def _table_options(committer: Committer, args: argparse.Namespace, step: Steps) -> JobOptions:
    """The flags' table, else the one the newest job published to a format names.

    Raises:
        ConfigError: a format's flags without its ``--format``, or a bad table name.
        NotFound: no flag, and no job at DEST was published to a table format.
    """
    flags = _format_flags()
    given = {k: v for k in flags if (v := getattr(args, k)) is not None}
    # The formats whose flags were given: each goes with its own --format only.
    named = list(dict.fromkeys(flags[k][0] for k in given))
    for table_format in named:
        if args.format is not None and args.format != table_format:
            raise ConfigError(f"{_flags_of(table_format)} go with --format {table_format}")
        if args.format is None:
            raise ConfigError(f"{_flags_of(table_format)} need --format {table_format}")
    if args.format is not None:
        return parse_options({"table_format": args.format, **given})
    for record in reversed(committer.jobs(step("reading job records", None, "jobs"))):
        if record.table_commit is not None:
            return record.options
    raise NotFound(
        f"no job at {committer.dest.url} was published to a table format; name the "
        f"table's format with --format (and {_all_flags()})"
    )


def _all_flags() -> str:
    return ", ".join(flag for _, flag, _ in _format_flags().values())
