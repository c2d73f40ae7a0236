"""argparse types: a bad value is a usage error (exit code 2) with a message that says why."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from zero_rename.cli.durations import duration_arg
from zero_rename.core.layout import check_job_id
from zero_rename.core.profiles import check_profile_name
from zero_rename.errors import ConfigError

__all__ = ["Subcommands", "duration_arg", "job_id_arg", "positive_int", "store_profile_arg"]

# What each command module's ``register(groups, common)`` is given: argparse's
# subparsers action (generic to type checkers only, so named in a string).
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def job_id_arg(text: str) -> str:
    try:
        return check_job_id(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def store_profile_arg(text: str) -> str:
    try:
        return check_profile_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
