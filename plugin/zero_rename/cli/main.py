"""The ``zero-rename`` command: parse, run one command, turn errors into exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn, TextIO

from zero_rename import __version__
from zero_rename.cli import doctor, jobs, lifecycle, partitions, serve, success, table, uploads
from zero_rename.cli.arguments import store_profile_arg
from zero_rename.cli.context import Context
from zero_rename.cli.exits import EPILOG, ExitCode, exit_code_for
from zero_rename.cli.output import Output, stderr_safe, terminal_safe
from zero_rename.core import PROFILES, redact
from zero_rename.errors import ZeroRenameError

DESCRIPTION = """\
Inspect and clean up what the zero-rename committer keeps in S3: pending
uploads, job records, _SUCCESS; set the bucket rule that aborts abandoned
uploads; run an embedded S3 server. Credentials come from boto3's
standard chain (environment, profile, instance role), never from options."""


def common_options(suppress: bool) -> argparse.ArgumentParser:
    """Options every command takes, before or after its name.

    The copy on each command has no defaults (SUPPRESS), so it only sets what
    is given there and never undoes what was given before the command name.
    """
    parser = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    group = parser.add_argument_group("common options")
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=default,
        help="S3 endpoint (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)",
    )
    group.add_argument(
        "--region",
        metavar="REGION",
        default=default,
        help="S3 region (default: boto3's, else us-east-1)",
    )
    group.add_argument(
        "--store-profile",
        metavar="NAME",
        default=default,
        type=store_profile_arg,
        help="the S3 store's family: auto (default), "
        + ", ".join(sorted(PROFILES))
        + "; see `zero-rename doctor`",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS if suppress else 0,
        help="log progress (-v) or debug (-vv) to stderr; tracebacks on errors",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="print one JSON document on stdout, nothing else",
    )
    return parser


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error given as every other error: one line on stderr,
    exit code 2, and nothing of the command line echoed that could act on a
    terminal or carry a credential (argparse quotes unrecognized arguments whole)."""

    def error(self, message: str) -> NoReturn:
        self.exit(
            int(ExitCode.USAGE),
            f"error: {self.prog}: {stderr_safe(message)} (see {self.prog} --help)\n",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="zero-rename",
        description=DESCRIPTION,
        epilog=EPILOG,
        parents=[common_options(suppress=False)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    common = common_options(suppress=True)
    for module in (uploads, jobs, partitions, success, table, lifecycle, doctor, serve):
        module.register(groups, common)
    _share_epilog(parser)
    return parser


def _share_epilog(parser: argparse.ArgumentParser) -> None:
    """Every command's --help ends with the exit codes."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.epilog = EPILOG
                sub.formatter_class = argparse.RawDescriptionHelpFormatter
                _share_epilog(sub)


class StderrHandler(logging.StreamHandler[TextIO]):
    """A handler writing to ``sys.stderr`` as it is when each record comes: while
    progress is drawn, that puts the line above the display rather than through it."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


class SafeFormatter(logging.Formatter):
    """Log lines as error lines are: no credential, nothing a terminal acts on."""

    def format(self, record: logging.LogRecord) -> str:
        return "\n".join(terminal_safe(redact(line)) for line in super().format(record).split("\n"))


@contextmanager
def logging_to_stderr(verbose: int) -> Iterator[None]:
    """Library logs to stderr while a command runs: warnings always, progress with -v,
    debug with -vv. The previous logging setup comes back afterwards, so running
    ``main`` inside another program (or a test session) leaves its logging alone."""
    logger = logging.getLogger("zero_rename")
    saved = (logger.level, logger.propagate)
    handler = StderrHandler()
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(
        logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    )
    logger.propagate = False
    # Only zero-rename's logger: botocore's debug log would print request headers.
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code or 0) if not isinstance(exc.code, str) else int(ExitCode.USAGE)
    out = Output(json_mode=bool(args.json))
    verbose = int(getattr(args, "verbose", 0) or 0)
    try:
        # Building the context checks the endpoint and destination: bad input, exit 2.
        ctx = Context.from_args(args, out)
        with logging_to_stderr(verbose):
            result = args.handler(ctx, args)
        out.emit(result)
    except KeyboardInterrupt:
        out.error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except ZeroRenameError as exc:
        _traceback(verbose)
        out.error(str(exc) or type(exc).__name__)
        return int(exit_code_for(exc))
    except Exception as exc:  # noqa: BLE001 - a bug, or an error no layer named
        # Still one line: a traceback is for -v, never for hostile input.
        _traceback(verbose)
        out.error(f"unexpected {type(exc).__name__}: {exc}; run with -v for the traceback")
        return int(ExitCode.FAILED)
    return int(result.code)


def _traceback(verbose: int) -> None:
    """With -v, the traceback of the error being handled, credentials masked."""
    if verbose:
        sys.stderr.write(redact(traceback.format_exc()))


if __name__ == "__main__":
    sys.exit(main())
