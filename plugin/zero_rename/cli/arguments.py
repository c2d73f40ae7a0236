"""argparse types (a bad value is a usage error, exit code 2, with a message that says
why) and the shape every command is declared in."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeAlias

from zero_rename.cli.context import Context
from zero_rename.cli.durations import duration_arg, format_span
from zero_rename.cli.output import Result, short_ids
from zero_rename.core import (
    STUCK_AFTER,
    check_destination_length,
    check_job_ref,
    check_profile_name,
)
from zero_rename.errors import ConfigError

__all__ = [
    "Subcommands",
    "add_stuck_after",
    "add_wide",
    "command",
    "command_group",
    "destination_arg",
    "duration_arg",
    "job_id_arg",
    "job_ids",
    "threads_arg",
    "whole_number",
    "store_profile_arg",
]

Handler = Callable[[Context, argparse.Namespace], Result]
# Where commands are added: argparse's subparsers action (generic to type
# checkers only, so named in a string).
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
DEST_HELP = "s3://bucket/path"


def add_stuck_after(parser: argparse.ArgumentParser) -> None:
    """``--stuck-after``, as every view that marks stuck jobs takes it."""
    parser.add_argument(
        "--stuck-after",
        type=duration_arg,
        default=STUCK_AFTER,
        metavar="DURATION",
        help="a job in setup, sealed, committing or rolling back is stuck after this long "
        "unchanged "
        f"(default {format_span(STUCK_AFTER.total_seconds())})",
    )


def add_wide(parser: argparse.ArgumentParser) -> None:
    """``--wide``: whole job ids in a table that shows their first characters."""
    parser.add_argument(
        "--wide",
        action="store_true",
        help="whole job ids (default: the first 8 characters, more where two jobs "
        "share them; every command taking a job id accepts them)",
    )


def job_ids(ids: Sequence[str], wide: bool) -> dict[str, str]:
    """Each job id as a table shows it: whole with ``--wide``, else its shortest
    unambiguous prefix of at least 8 characters."""
    return {i: i for i in ids} if wide else short_ids(ids)


def destination_arg(text: str) -> str:
    """DEST, refused at once (a usage error) when longer than any S3 URL can be:
    nothing else is done with it, nor is it echoed."""
    try:
        return check_destination_length(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def job_id_arg(text: str) -> str:
    """A job id, or its first 8 characters or more (the command resolves it)."""
    try:
        return check_job_ref(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def whole_number(most: int) -> Callable[[str], int]:
    """argparse ``type=`` for a count from 1 to ``most``."""

    def parse(text: str) -> int:
        try:
            # The length bound keeps int() off texts of thousands of digits.
            value = int(text) if len(text) <= 32 else 0
        except ValueError:
            value = 0
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(
                f"{text[:40]!r} is not a whole number from 1 to {most:,}"
            )
        return value

    return parse


# Parallel requests: one thread each, and S3 takes far fewer than a thousand
# from one client before it throttles.
MAX_THREADS = 1024
threads_arg = whole_number(MAX_THREADS)


def store_profile_arg(text: str) -> str:
    try:
        return check_profile_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def command_group(groups: Subcommands, name: str, help: str) -> Subcommands:
    """A command with subcommands (``zero-rename jobs list``): where they are added."""
    parser = groups.add_parser(name, help=help)
    return parser.add_subparsers(dest="command", metavar="COMMAND", required=True)


def command(
    commands: Subcommands,
    name: str,
    common: argparse.ArgumentParser,
    handler: Handler,
    *,
    help: str,
    description: str,
    dest: str | None = None,
    job: bool = False,
) -> argparse.ArgumentParser:
    """A command taking the common options, run by ``handler``; with ``dest`` (its
    help) a DEST argument, with ``job`` a JOB id after it."""
    parser = commands.add_parser(name, parents=[common], help=help, description=description)
    if dest is not None:
        parser.add_argument("dest", metavar="DEST", type=destination_arg, help=dest)
    if job:
        parser.add_argument(
            "job",
            metavar="JOB",
            type=job_id_arg,
            help="job id, or its first 8 characters or more (as long as no other job's starts so)",
        )
    parser.set_defaults(handler=handler)
    return parser
